package output

// A range shuffle's map output (shared/blob/rangerun.go has the object's
// layout; internal/executor/rangeshuffle reads it): the attempt's records
// in one buffer, sorted by key when the function returns and put as one
// sorted run, one PUT. Nothing streams: sorting needs every record in
// memory, so the records are capped by the attempt's cap on buffered
// outputs (tuning.MaxTaskOutput), and a task that writes more fails with
// a refusal saying so, rather than spill (several runs per map task would
// multiply the reducers' GETs and the merge's width).

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// Range makes o the map output of a range shuffle: o must have one
// partition (New(1, ...)), into which Emit and Write put records; call it
// before Bind.
func (o *Output) Range() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ranged = true
	o.indexed = false
}

// rangedTooLarge is the refusal of a write past the cap, limit. A
// function, not a method: Output is at the 40 methods a type may declare.
func rangedTooLarge(limit int64) error {
	return fmt.Errorf("%w: a map task of a range shuffle (by: range) sorts its records in memory, at most %d bytes of them; "+
		"give each task less to read (a smaller splitSize)", ErrOutputTooLarge, limit)
}

// rangedPartition is the refusal of a write to a partition other than 0.
func rangedPartition(r int) error {
	return fmt.Errorf("output partition %d: a map task of a range shuffle (by: range) writes its records to partition 0 "+
		"(Emit, or key<TAB>value lines to Write); the boundaries, drawn after every map task, pick each key's partition", r)
}

// publishRanged sorts o's records and puts the run: one PUT, nothing if
// no record was written. o.mu is held.
func publishRanged(ctx context.Context, o *Output, b Blob) error {
	p := o.parts[0]
	if p.size == 0 {
		return nil
	}
	if p.last != '\n' {
		// The last line gets its newline once: a retried publish sorts
		// the same records. Records counts the line either way.
		p.buf = append(p.buf, '\n')
		p.last = '\n'
		p.lines++
	}
	head, spans, err := blob.SortRun(p.buf, blob.DefaultRunSamples)
	if err != nil {
		return fmt.Errorf("sort the range shuffle's records: %w", err)
	}
	key := o.key(0)
	body, size := blob.RunBody(head, p.buf, spans)
	err = b.PutReaderIfAbsent(ctx, key, body, size)
	if errors.Is(err, ErrUnsupported) {
		raw := make([]byte, size)
		if _, err := body.ReadAt(raw, 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		err = b.PutIfAbsent(ctx, key, raw)
	}
	if err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("put the range shuffle's sorted run: %w", err)
	}
	return nil
}
