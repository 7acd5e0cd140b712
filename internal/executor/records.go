package executor

import (
	"context"

	"github.com/batchwork/batchwork/internal/executor/reccount"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// countInput wraps a task's input so its records are counted as read.
func countInput(t *Task) *reccount.Reader {
	if t.Input == nil {
		return nil
	}
	lc := reccount.New(t.Input, t.Format == spec.FormatCSV)
	t.Input = lc
	return lc
}

// commit commits the attempt with its output count and the records read
// and written (output lines).
func (r *Runner) commit(ctx context.Context, c control.Claim, t *Task, in *reccount.Reader) error {
	// Written here: the runner's own If-None-Match puts, or their 412s,
	// proved each output exists (published.go).
	res := control.CommitResult{Outputs: r.objects(c, t), WrittenHere: true}
	if in != nil {
		res.RecordsIn = in.Records()
	}
	// Counted as written: a streamed partition is no longer in memory.
	res.RecordsOut = t.Out.Records()
	res.BadRecords = t.Rejects.Count() // reject.go
	return r.CP.Commit(ctx, c, res)
}
