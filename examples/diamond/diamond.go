// Package diamond is the diamond DAG example: A, then B and C, then D.
package diamond

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// Task is the task name every stage of the example uses.
const Task = "diamond.step"

// Register adds the example's task function, which runs hook (if set) and
// writes one line naming its stage, partition and attempt.
func Register(reg *batchwork.Registry, hook func(context.Context, *batchwork.Task) error) {
	reg.Register(Task, func(ctx context.Context, t *batchwork.Task) error {
		if hook != nil {
			if err := hook(ctx, t); err != nil {
				return err
			}
		}
		_, err := fmt.Fprintf(t.Out, "%s/%d attempt %d params %v\n", t.Stage, t.Partition, t.Attempt, t.Params)
		return err
	})
}

// Spec is the diamond job with n partitions per stage.
func Spec(name string, n int) []byte {
	return fmt.Appendf(nil, `name: %s
stages:
  - {name: a, task: %s, partitions: {count: %d}}
  - {name: b, task: %s, after: [a], partitions: {count: %d}}
  - {name: c, task: %s, after: [a], partitions: {count: %d}}
  - {name: d, task: %s, after: [b, c], partitions: {count: %d}}
`, name, Task, n, Task, n, Task, n, Task, n)
}
