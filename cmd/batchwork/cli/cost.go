package cli

import (
	"fmt"
	"io"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// printCost prints a job's cost rows in the status table: its AWS
// requests' price by service, and its tasks' compute time.
func printCost(tw io.Writer, c *client.JobCost) {
	if c == nil {
		return
	}
	r, d := c.Requests, c.Dollars
	fmt.Fprintf(tw, "Cost:\t%s in AWS requests (us-east-1 list prices of %s)\n", dollars(d.Requests), termsafe.Text(c.PricesDate))
	fmt.Fprintf(tw, "\tDynamoDB %s: %s requests, %s read units, %s write units\n", dollars(d.DynamoDB),
		count(int64(r.DynamoRequests+0.5)), units(r.DynamoReadUnits), units(r.DynamoWriteUnits))
	fmt.Fprintf(tw, "\tSQS %s: %s requests\n", dollars(d.SQS), count(int64(r.SQSRequests+0.5)))
	fmt.Fprintf(tw, "\tS3 %s: %s PUT/COPY/POST/LIST, %s GET/HEAD, %s DELETE\n", dollars(d.S3),
		count(int64(r.S3Tier1+0.5)), count(int64(r.S3Tier2+0.5)), count(int64(r.S3Free+0.5)))
	if r.LambdaInvokes > 0 || r.Events > 0 {
		fmt.Fprintf(tw, "\tLambda %s: %s invocations; EventBridge %s: %s events\n", dollars(d.Lambda), count(int64(r.LambdaInvokes+0.5)),
			dollars(d.EventBridge), count(int64(r.Events+0.5)))
	}
	fmt.Fprintf(tw, "Compute:\t%.1f s of task attempts, %.1f GB-s\n", r.ComputeSeconds, r.GBSeconds)
}

// dollars prints a price to the hundredth of a cent: a job's requests
// often cost less than a cent.
func dollars(f float64) string { return fmt.Sprintf("$%.4f", f) }

func units(f float64) string {
	if f == float64(int64(f)) {
		return count(int64(f))
	}
	return fmt.Sprintf("%.1f", f)
}
