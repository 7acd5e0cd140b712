// Command batchwork-executor is the long-running executor host the
// Fargate service runs (see the Dockerfile): executor slots fed by long
// polling the three ready queues, configured like the Lambda functions
// (shared/lambdaenv) plus BATCHWORK_SLOTS. On SIGTERM (a scale-in or a
// deployment) it stops receiving and lets running tasks finish and commit.
// shared/batchwork's Main does all of that; this command only registers
// the example task functions, as your own executor registers yours.
package main

import (
	"github.com/batchwork/batchwork/examples"
	"github.com/batchwork/batchwork/shared/batchwork"
)

func main() {
	examples.Register(batchwork.DefaultRegistry)
	batchwork.Main()
}
