// Command executor is the Lambda executor: an SQS event source with partial
// batch failures, running the example task functions registered here.
// Your own executor is the same few lines in your own module, with your
// functions registered (see shared/batchwork and `batchwork init`).
package main

import (
	"github.com/batchwork/batchwork/examples"
	"github.com/batchwork/batchwork/shared/batchwork"
)

func main() {
	register(batchwork.DefaultRegistry)
	batchwork.Main()
}

// register adds this executor's task functions to reg: the examples, as
// the default stack tells the API (infra/stack.go).
func register(reg *batchwork.Registry) { examples.Register(reg) }
