// Command executor is batchwork-executor with the chaos workloads' task
// function (cmd/chaos/chaostasks) registered beside the examples: the
// executor a chaos run starts and kills.
package main

import (
	"github.com/batchwork/batchwork/cmd/chaos/chaostasks"
	"github.com/batchwork/batchwork/examples"
	"github.com/batchwork/batchwork/shared/batchwork"
)

func main() {
	examples.Register(batchwork.DefaultRegistry)
	chaostasks.Register(batchwork.DefaultRegistry)
	batchwork.Main()
}
