// Package examples registers every example task (word count, the diamond
// DAG, the join, the sort) on one registry: the repository's own executors run
// exactly these, and its default stack tells the API their names, so the
// Lambda executor (started only by queued work) and a Fargate service at
// zero never leave a submit waiting for names nobody has published.
package examples

import (
	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/join"
	sortex "github.com/batchwork/batchwork/examples/sort"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
)

// Register adds every example task to reg.
func Register(reg *batchwork.Registry) {
	wordcount.Register(reg)
	diamond.Register(reg, nil)
	join.Register(reg)
	sortex.Register(reg)
}

// Names are the example tasks' names, sorted.
func Names() []string {
	reg := batchwork.NewRegistry()
	Register(reg)
	return reg.Names()
}
