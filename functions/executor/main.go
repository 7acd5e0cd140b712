// Command executor is the Lambda executor: an SQS event source with partial
// batch failures, running the task functions registered here. Users build
// their own from this main with their functions registered.
package main

import (
	"context"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/executor"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

func main() {
	lambda.Start(handler(lambdaenv.Must(context.Background())).Handle)
}

// handler builds the SQS handler with this binary's task functions. SQS
// events name their queue by ARN; the URLs it needs for visibility changes
// come from the environment, keyed by queue name.
func handler(w lambdaenv.Wired) *executor.LambdaHandler {
	reg := executor.NewRegistry()
	wordcount.Register(reg)
	diamond.Register(reg, nil)
	urls := map[string]string{}
	for _, u := range []string{os.Getenv("BATCHWORK_QUEUE_HIGH"), os.Getenv("BATCHWORK_QUEUE_NORMAL"), os.Getenv("BATCHWORK_QUEUE_LOW")} {
		urls[u[strings.LastIndex(u, "/")+1:]] = u
	}
	return &executor.LambdaHandler{
		Runner: &executor.Runner{CP: w.Service, Blob: w.Blob, Registry: reg, Log: w.Log},
		Queue:  w.Queue, QueueURLs: urls,
	}
}
