// Command commit commits a remote executor's attempt: the claim it was
// granted plus its output count in, an error unless it committed.
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

func handler(w lambdaenv.Wired) func(context.Context, control.RemoteCommitRequest) error {
	return func(ctx context.Context, req control.RemoteCommitRequest) error {
		defer w.Metrics.Flush() // the process may be frozen after it returns
		defer tracing.Flush(ctx)
		c, res, err := req.CommitArgs(ctx, w.Service.CachedSpec)
		if err != nil {
			return err
		}
		return w.Service.Commit(ctx, c, res)
	}
}
