// Command sweep is the scheduled sweep Lambda (EventBridge, every minute).
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

func main() {
	w := lambdaenv.Must(context.Background())
	// A run's errors are returned so the Lambda error metric (and its
	// alarm) sees them; the counts are logged either way.
	lambda.Start(func(ctx context.Context) (control.SweepCounts, error) { return w.Service.Sweep(ctx) })
}
