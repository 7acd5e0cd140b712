package main

import (
	"context"
	"fmt"
	"math"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/control"
	listprices "github.com/batchwork/batchwork/shared/cost"
)

// jobCostTolerance is how far a job's own cost figure (its status,
// shared/cost) may be from the bench's count of the same run's requests.
// The job's figure leaves out what no job can be charged with (empty
// polls, the sweep's scans) and the requests after its last count (its
// manifests and end), and the bench's estimates of units DynamoDB Local
// does not report differ a little from the meter's.
const jobCostTolerance = 0.05

// checkJobCost prints a job's own cost figure next to the bench's count
// of the requests since rec was reset, and fails when they disagree by
// more than jobCostTolerance.
func checkJobCost(ctx context.Context, watcher *control.Service, id string, snap loadmodel.Snapshot) error {
	st, err := watcher.Status(ctx, "bench", id)
	if err != nil {
		return err
	}
	tot := snap.Totals()
	bench := listprices.Price(listprices.Counts{
		DynamoReadUnits: tot.RCU, DynamoWriteUnits: tot.WCU, SQSRequests: float64(tot.Chunks),
		S3Tier1: float64(tot.S3[listprices.S3Tier1]), S3Tier2: float64(tot.S3[listprices.S3Tier2]),
	})
	var job listprices.Dollars
	var c listprices.Counts
	if st.Cost != nil {
		job, c = st.Cost.Dollars, st.Cost.Requests
	}
	apart := math.Abs(job.Requests-bench.Requests) / bench.Requests
	fmt.Printf("  the job's own cost (batchwork status): $%.4f (DynamoDB $%.4f, SQS $%.4f, S3 $%.4f; %.0f requests, %.1f s of compute);\n",
		job.Requests, job.DynamoDB, job.SQS, job.S3, c.DynamoRequests+c.SQSRequests+c.S3Tier1+c.S3Tier2+c.S3Free, c.ComputeSeconds)
	fmt.Printf("    the bench's count: $%.4f (DynamoDB $%.4f, SQS $%.4f, S3 $%.4f): %.1f%% apart (at most %.0f%%)\n",
		bench.Requests, bench.DynamoDB, bench.SQS, bench.S3, 100*apart, 100*jobCostTolerance)
	if apart > jobCostTolerance {
		return fmt.Errorf("job %s: its cost figure $%.4f and the bench's count $%.4f are %.1f%% apart, more than %.0f%%",
			id, job.Requests, bench.Requests, 100*apart, 100*jobCostTolerance)
	}
	return nil
}
