// Command executor is the Lambda executor: an SQS event source with partial
// batch failures, running the task functions registered here. Users build
// their own from this main with their functions registered.
package main

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/tuning"
)

func main() {
	if limit, ok := softMemoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
	}
	lambda.Start(handler(lambdaenv.Must(context.Background())).Handle)
}

// softMemoryLimit is the Go runtime's soft memory limit for this
// function's memory (tuning.SoftMemoryLimit: the split and output caps are
// sized for live bytes, and without it the heap may grow to twice them),
// unless an operator set GOMEMLIMIT or this is not Lambda.
func softMemoryLimit(getenv func(string) string) (int64, bool) {
	mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb <= 0 || getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return tuning.SoftMemoryLimit(mb), true
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
