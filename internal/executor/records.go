package executor

import (
	"bytes"
	"context"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// lineCounter counts the records (lines) a task function reads from its
// input: a final line without a newline counts too. It also keeps the
// first read error, so an attempt whose function ignored one (a JSON
// Lines record that is not JSON, a broken download) fails, not commits
// the records before it as the whole.
type lineCounter struct {
	r       io.Reader
	n       int64
	midLine bool
	csv     *csvCounter // CSV input: records, not lines (input.go)
	err     error
}

func (l *lineCounter) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	switch {
	case n > 0 && l.csv != nil:
		l.csv.count(p[:n])
	case n > 0:
		l.n += int64(bytes.Count(p[:n], []byte{'\n'}))
		l.midLine = p[n-1] != '\n'
	}
	if err != nil && err != io.EOF && l.err == nil {
		l.err = err
	}
	return n, err
}

// readErr is the first error reading the input returned, if any.
func (l *lineCounter) readErr() error {
	if l == nil || l.err == nil {
		return nil
	}
	return fmt.Errorf("read input: %w", l.err)
}

func (l *lineCounter) records() int64 {
	if l.csv != nil {
		return l.csv.records()
	}
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
	if t.Format == spec.FormatCSV {
		lc.csv = &csvCounter{}
	}
	t.Input = lc
	return lc
}

// commit commits the attempt with its output count and the records read
// and written (output lines).
func (r *Runner) commit(ctx context.Context, c control.Claim, t *Task, in *lineCounter) error {
	// Written here: the runner's own If-None-Match puts, or their 412s,
	// proved each output exists (published.go).
	res := control.CommitResult{Outputs: r.objects(c, t), WrittenHere: true}
	if in != nil {
		res.RecordsIn = in.records()
	}
	// Counted as written: a streamed partition is no longer in memory.
	res.RecordsOut = t.Out.Records()
	res.BadRecords = t.Rejects.Count() // reject.go
	return r.CP.Commit(ctx, c, res)
}
