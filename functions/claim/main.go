// Command claim grants claims to remote executors that have no table
// access of their own: {"task": "job/stage/partition"} in, the claim out.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/tracing"
)

func main() {
	lambda.Start(handler(lambdaenv.Must(context.Background())))
}

func handler(w lambdaenv.Wired) func(context.Context, control.RemoteClaimRequest) (control.RemoteClaim, error) {
	return func(ctx context.Context, req control.RemoteClaimRequest) (control.RemoteClaim, error) {
		defer w.Metrics.Flush() // the process may be frozen after it returns
		defer tracing.Flush(ctx)
		return w.Service.RemoteClaim(ctx, req)
	}
}
