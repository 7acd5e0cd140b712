package executor

import (
	"context"

	"github.com/batchwork/batchwork/shared/control"
)

// noOutput reports an attempt that has nothing to publish: a stage with
// one output partition (no shuffle) whose task wrote no byte to it and
// started no upload. It writes no object and commits 0 outputs, so its
// task costs no PutObject (and, committed by a remote executor, no
// listing). Not for a lambda stage: its function writes its objects
// itself, and the runner's empty puts are what find them (publish).
// Shuffle outputs have their own rule (output.Output.Objects).
func (r *Runner) noOutput(c control.Claim, t *Task) bool {
	if c.Spec.Stages[c.Task.Ref.Stage].Lambda != "" {
		return false
	}
	return t.Out.Unwritten()
}

// publish writes the attempt's outputs, unless it has none.
func (r *Runner) publish(ctx context.Context, c control.Claim, t *Task) error {
	if r.noOutput(c, t) {
		return nil
	}
	return t.Out.Publish(ctx, r.Blob)
}

// objects is the number of outputs the attempt commits.
func (r *Runner) objects(c control.Claim, t *Task) int {
	if r.noOutput(c, t) {
		return 0
	}
	return t.Out.Objects()
}
