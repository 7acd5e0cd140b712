// Command api is the API Lambda: submit and status behind API Gateway, with
// IAM authorization; the caller's principal is the job owner.
package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/lambdahttp"
)

func main() {
	w := lambdaenv.Must(context.Background())
	h := api.New(w.Service, func(r *http.Request) (string, bool) {
		v := r.Header.Get(lambdahttp.OwnerHeader)
		return v, v != ""
	}, w.Log)
	lambda.Start(lambdahttp.Adapt(h))
}
