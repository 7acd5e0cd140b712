// Command api is the API Lambda: submit and status behind API Gateway, with
// IAM authorization; the caller's principal is the job owner.
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/lambdahttp"
	"github.com/batchwork/batchwork/shared/tracing"
)

func main() {
	// Submits are checked against the executors' task names (BATCHWORK_TASK_NAMES and the published ones).
	w := lambdaenv.Must(context.Background(), lambdaenv.CheckTaskNames)
	// GET /jobs/{id}/logs reads the stack's log groups for the caller.
	if src, ok := lambdaenv.LogSource(w.AWS, os.Getenv); ok {
		w.Service.SetLogSource(src)
	}
	lambda.Start(handler(w))
}

// handler serves the API over the wired control plane. The owner is the
// IAM principal lambdahttp puts in OwnerHeader; a client's own value for
// that header never gets through.
func handler(w lambdaenv.Wired) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	h := api.New(w.Service, func(r *http.Request) (string, bool) {
		v := r.Header.Get(lambdahttp.OwnerHeader)
		return v, v != ""
	}, w.Log)
	serve := lambdahttp.Adapt(h, w.OwnerMode)
	return func(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		defer tracing.Flush(ctx) // the process may be frozen after it returns
		return serve(ctx, req)
	}
}
