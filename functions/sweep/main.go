// Command sweep is the scheduled sweep Lambda (EventBridge, every minute).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

func main() {
	lambda.Start(handler(lambdaenv.Must(context.Background())))
}

// handler runs one sweep. A run's errors are returned so the Lambda error
// metric (and its alarm) sees them; the counts are logged either way.
func handler(w lambdaenv.Wired) func(context.Context) (control.SweepCounts, error) {
	return func(ctx context.Context) (control.SweepCounts, error) { return w.Service.Sweep(ctx) }
}
