// Package rejects keeps the records one task attempt rejected as bad
// (Task.Reject): where each was in the task's input, why, and whether the
// attempt passed its stage's maxBadRecords.
package rejects

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/domain"
)

// Rejects collects the records one attempt rejected (Task.Reject): kept
// in memory until the attempt ends, then written as one object before
// the attempt commits (the executor's saveRejects), and counted in the
// commit against the stage's maxBadRecords. RunTask keeps one too, so
// that rejections can be unit tested.
type Rejects struct {
	stage          string
	partition, att int
	// max is the stage's maxBadRecords: one more rejection than that
	// fails the attempt, whatever the other tasks did.
	max int

	mu      sync.Mutex
	kept    []domain.BadRecord
	n       int64
	in      *tailReader // nil: the task has no input stream
	located int64       // where the last located record ended
}

// New returns the rejections of one attempt, of a stage that
// allows max bad records. in, when not nil, is the task's input: the
// returned reader, which the task must read instead, lets Reject find
// where in it a record starts.
func New(stage string, partition, attempt, max int, in io.Reader) (*Rejects, io.Reader) {
	r := &Rejects{stage: stage, partition: partition, att: attempt, max: max}
	if in == nil {
		return r, nil
	}
	r.in = &tailReader{r: in, mu: &r.mu}
	return r, r.in
}

// Reject records that the attempt rejected record for reason. offset is
// where the record starts in the task's input, or negative for the
// runner to find it (locate). Past the stage's maxBadRecords it returns
// an error wrapping domain.ErrTooManyBadRecords and domain.ErrPermanent:
// the attempt will fail whatever the function does, so it may as well
// stop.
func (r *Rejects) Reject(offset int64, record []byte, reason string) error {
	if r == nil {
		return errors.New("reject: this task cannot reject records")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if offset < 0 {
		offset = r.locate(record)
	}
	r.n++
	if len(r.kept) < domain.MaxBadRecordsKept {
		if strings.TrimSpace(reason) == "" {
			reason = "(no reason given)"
		}
		r.kept = append(r.kept, domain.BadRecord{
			Stage: r.stage, Partition: r.partition, Attempt: r.att, Offset: offset,
			Record: clip(string(record), domain.MaxBadRecordBytes), Reason: clip(reason, domain.MaxBadReasonBytes),
		})
	}
	return r.errLocked()
}

// Count is how many records the attempt rejected, kept or not.
func (r *Rejects) Count() int64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// Records are the rejections kept, in the order they were made.
func (r *Rejects) Records() []domain.BadRecord {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]domain.BadRecord(nil), r.kept...)
}

// Err is the attempt's failure for rejecting more than its stage allows,
// or nil.
func (r *Rejects) Err() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errLocked()
}

func (r *Rejects) errLocked() error {
	if r.n <= int64(r.max) {
		return nil
	}
	return TooManyBadRecords(fmt.Sprintf("task rejected %d records", r.n), r.max)
}

// TooManyBadRecords is the error of a task past its stage's
// maxBadRecords: what happened, then the limit.
func TooManyBadRecords(what string, max int) error {
	return fmt.Errorf("%s; stage allows %d (maxBadRecords): %w: %w", what, max, domain.ErrTooManyBadRecords, domain.ErrPermanent)
}

// locate finds where record starts in the input the function has read:
// the first place at or after the end of the previously located record,
// within the last tailWindow bytes read, where the record's bytes (less a
// trailing line end) stand as a whole line. -1 when they do not (the
// function changed the record, or read far past it before rejecting).
func (r *Rejects) locate(record []byte) int64 {
	if r.in == nil {
		return -1
	}
	rec := bytes.TrimRight(record, "\r\n")
	win, base := r.in.win, r.in.base
	from := max(r.located-base, 0)
	for from <= int64(len(win)) {
		i := bytes.Index(win[from:], rec)
		if i < 0 {
			return -1
		}
		start := from + int64(i)
		end := start + int64(len(rec))
		lineStart := start == 0 && base == 0 || start > 0 && win[start-1] == '\n'
		lineEnd := end == int64(len(win)) || win[end] == '\n' || win[end] == '\r'
		if lineStart && lineEnd {
			r.located = base + end
			return base + start
		}
		from = start + 1
	}
	return -1
}

// clip cuts s to at most n bytes (on a rune boundary), marking the cut
// with the length it had.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("…[truncated: %d bytes]", len(s))
}

// tailWindow is how much of the input, back from what the function has
// read, Reject searches for a record: more than a bufio.Scanner reads
// ahead with its default buffer, or Records with its own.
const tailWindow = 1 << 20

// tailReader is the task's input, keeping the last bytes read and their
// offset so that Reject can find a record in them.
type tailReader struct {
	r    io.Reader
	mu   *sync.Mutex // the Rejects': a function may reject from another goroutine
	win  []byte
	base int64 // input offset of win[0]
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if n > 0 {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.win = append(t.win, p[:n]...)
		// Keep at least tailWindow bytes and the whole of this read;
		// compact only when twice over, so the copy is amortised.
		if drop := len(t.win) - max(tailWindow, n); drop > tailWindow {
			t.win = append(t.win[:0], t.win[drop:]...)
			t.base += int64(drop)
		}
	}
	return n, err
}

// Resume starts an attempt's rejections with those of the checkpoint it
// resumes from: they are committed with the attempt's own.
func (r *Rejects) Resume(from *domain.Checkpoint) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kept = append(slices.Clone(from.BadRecords), r.kept...)
	r.n += from.BadRecordCount
}
