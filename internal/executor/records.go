package executor

import (
	"bytes"
	"context"
	"io"

	"github.com/batchwork/batchwork/shared/control"
)

// recordCommitter is a control plane that takes record counts at commit
// (control.Service does); others get the output count alone.
type recordCommitter interface {
	CommitWith(context.Context, control.Claim, control.CommitResult) error
}

// lineCounter counts the records (lines) a task function reads from its
// input: a final line without a newline counts too.
type lineCounter struct {
	r       io.Reader
	n       int64
	midLine bool
}

func (l *lineCounter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if n > 0 {
		l.n += int64(bytes.Count(p[:n], []byte{'\n'}))
		l.midLine = p[n-1] != '\n'
	}
	return n, err
}

func (l *lineCounter) records() int64 {
	if l.midLine {
		return l.n + 1
	}
	return l.n
}

// countInput wraps a task's input so its records are counted as read.
func countInput(t *Task) *lineCounter {
	if t.Input == nil {
		return nil
	}
	lc := &lineCounter{r: t.Input}
	t.Input = lc
	return lc
}

// commit commits the attempt with its output count and, when the control
// plane takes them, the records read and written (output lines).
func (r *Runner) commit(ctx context.Context, c control.Claim, t *Task, in *lineCounter) error {
	rc, ok := r.CP.(recordCommitter)
	if !ok {
		return r.CP.Commit(ctx, c, t.Out.Parts())
	}
	res := control.CommitResult{Outputs: t.Out.Parts()}
	if in != nil {
		res.RecordsIn = in.records()
	}
	for _, p := range t.Out.parts {
		b := p.Bytes()
		res.RecordsOut += int64(bytes.Count(b, []byte{'\n'}))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			res.RecordsOut++
		}
	}
	return rc.CommitWith(ctx, c, res)
}
