package output

// The indexed shuffle output (shared/blob/shuffle.go has the object's
// layout; internal/executor/shuffle.go says which stages write it and how
// reducers read it): all partitions of a map task in one object, one PUT.

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// Index makes o write its partitions as one indexed object; call it
// before Bind.
func (o *Output) Index() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.indexed = len(o.parts) > 1
}

// Objects is the number of output objects the attempt commits: one per
// partition, or for an indexed shuffle one, or none if it wrote nothing.
func (o *Output) Objects() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.indexed {
		return len(o.parts)
	}
	for _, p := range o.parts {
		if p.size > 0 {
			return 1
		}
	}
	return 0
}

// publishIndexed puts the indexed object: one PUT, nothing if the
// partitions are all empty. o.mu is held.
func (o *Output) publishIndexed(ctx context.Context, b Blob) error {
	bufs := make([][]byte, len(o.parts))
	var total int64
	for r, p := range o.parts {
		bufs[r] = p.buf
		total += int64(len(p.buf))
	}
	if total == 0 {
		return nil
	}
	key := o.key(0)
	body, size := blob.ShuffleBody(bufs)
	err := b.PutReaderIfAbsent(ctx, key, body, size)
	if errors.Is(err, ErrUnsupported) {
		raw := make([]byte, size)
		if _, err := body.ReadAt(raw, 0); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		err = b.PutIfAbsent(ctx, key, raw)
	}
	if err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("put the indexed shuffle output: %w", err)
	}
	return nil
}
