package output

// Checkpoint segments. Once its attempt checkpoints (or resumed from a
// checkpoint), an Output writes each partition as immutable segment
// objects, one per checkpoint that found new bytes, and publishes each
// output object assembled from its segments in order: the object is
// written once, by the attempt that commits, and a resumed task's outputs
// are byte for byte those of an uninterrupted run. The runner's
// checkpointer (internal/executor/checkpoint.go) decides when to seal and
// records what a seal returns.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"

	"github.com/batchwork/batchwork/shared/domain"
)

// segments is an Output's state once its attempt checkpoints: its
// output partitions are written as sealed segments, one per checkpoint
// that found new bytes, and assembled into the attempt's output objects
// when it publishes.
type segments struct {
	seg    func(seq, r int) string // segment keys of this attempt
	next   int                     // the seq the open segments will have
	active bool                    // writes go to segments now
	final  func(r int) string      // the attempt's output objects
	parts  [][]string              // per partition, its segments in order
}

// AllowSegments lets the outputs become segments, named by seg (the
// attempt's segment key of seal seq, partition r); until then they are
// written as if they never would be.
func (o *Output) AllowSegments(seg func(seq, r int) string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.segments = &segments{seg: seg, next: 1}
}

// CanSegment reports whether AllowSegments was called.
func (o *Output) CanSegment() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.segments != nil
}

// SegmentKeys are the keys the next seal's segments will have, one per
// partition, and whether the outputs are segments already; nil when they
// cannot become segments. A lambda stage's function writes its outputs
// at these keys itself (TakeSegments).
func (o *Output) SegmentKeys() (keys []string, active bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.segments
	if s == nil {
		return nil, false
	}
	keys = make([]string, len(o.parts))
	for p := range o.parts {
		keys[p] = s.seg(s.next, p)
	}
	return keys, s.active
}

// EnterSegments switches the outputs to segments (from is the checkpoint
// resumed from, whose segments and counts they start with; nil: none).
// Once a partition streams to its output object it cannot switch: the
// function must call Resume (or Checkpoint) before writing a part's worth
// (8 MiB) to one partition.
func (o *Output) EnterSegments(from *domain.Checkpoint) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.segments
	if s == nil {
		return fmt.Errorf("%w: outputs cannot be checkpointed", domain.ErrCheckpoint)
	}
	if o.enc != nil {
		return errEncodedCheckpoint // encoded.go
	}
	if s.active {
		return nil
	}
	if o.ranged {
		return fmt.Errorf("%w: a map task of a range shuffle (by: range) sorts all of its records when it returns, so it cannot checkpoint", domain.ErrCheckpoint)
	}
	for r, p := range o.parts {
		if p.up != nil {
			return fmt.Errorf("%w: output partition %d streamed to its object before the task's first checkpoint; call Resume before writing outputs", domain.ErrCheckpoint, r)
		}
	}
	if from != nil && len(from.Outputs) != len(o.parts) {
		return fmt.Errorf("%w: the checkpoint has %d output partitions, the task %d", domain.ErrCheckpoint, len(from.Outputs), len(o.parts))
	}
	// Segments are per partition: an indexed shuffle output falls back
	// to one object per partition, as when it outgrows memory.
	if o.indexed {
		o.indexed = false
		o.sink = o.mp
	}
	s.active, s.final, s.parts = true, o.key, make([][]string, len(o.parts))
	o.key = func(r int) string { return s.seg(s.next, r) }
	if from != nil {
		for r, p := range o.parts {
			out := from.Outputs[r]
			s.parts[r] = slices.Clone(out.Segments)
			p.size, p.lines, p.last = out.Size, out.Lines, out.Last
		}
	}
	return nil
}

// Seal writes every partition's bytes since the last seal as a segment
// (completing its open upload, or putting its buffer) and returns the
// seal's seq and the partitions' segments so far. A failed seal can be
// retried: what it sealed stays sealed.
func (o *Output) Seal(ctx context.Context, b Blob) (int, []domain.CheckpointOutput, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	seq, err := o.sealLocked(ctx, b)
	if err != nil {
		return 0, nil, err
	}
	outs := make([]domain.CheckpointOutput, len(o.parts))
	for r, p := range o.parts {
		outs[r] = domain.CheckpointOutput{Segments: slices.Clone(o.segments.parts[r]), Size: p.size, Lines: p.lines, Last: p.last}
	}
	return seq, outs, nil
}

func (o *Output) sealLocked(ctx context.Context, b Blob) (seq int, err error) {
	if o.err != nil {
		return 0, o.err
	}
	s := o.segments
	seq = s.next
	sealed := false
	defer func() {
		if err != nil && sealed {
			// Part sealed: a later seal would reuse this seq, and a
			// partition sealed here would put its new bytes at the key
			// its segment holds (write-once: lost, the old segment listed
			// twice). The outputs are refused instead; a retry resumes
			// from the last checkpoint recorded.
			err = fmt.Errorf("%w (after sealing part of the outputs: the attempt's outputs are refused)", err)
			o.err = err
		}
	}()
	for r, p := range o.parts {
		key := o.key(r)
		switch {
		case p.up != nil:
			if len(p.buf) > 0 || len(p.up.done) == 0 {
				part, err := o.sink.UploadPart(ctx, key, p.up.id, int32(len(p.up.done)+1), p.buf)
				if err != nil {
					return 0, fmt.Errorf("last part of output partition %d's segment: %w", r, err)
				}
				p.up.done = append(p.up.done, part)
				o.uploaded++
				o.buffered -= int64(len(p.buf))
				p.buf = nil
			}
			err := o.sink.CompleteMultipartIfAbsent(ctx, key, p.up.id, p.up.done)
			if errors.Is(err, domain.ErrExists) {
				err = o.sink.AbortMultipart(ctx, key, p.up.id)
			}
			if err != nil {
				return 0, fmt.Errorf("complete output partition %d's segment: %w", r, err)
			}
			p.up = nil
		case len(p.buf) > 0:
			if err := b.PutIfAbsent(ctx, key, p.buf); err != nil && !errors.Is(err, domain.ErrExists) {
				return 0, fmt.Errorf("put output partition %d's segment: %w", r, err)
			}
			o.buffered -= int64(len(p.buf))
			p.buf = nil
		default:
			continue // nothing new in this partition
		}
		s.parts[r] = append(s.parts[r], key)
		sealed = true
	}
	s.next++
	return seq, nil
}

// publishSegments seals what is left and writes each output object from
// its partition's segments, in order. o.mu is held.
func (o *Output) publishSegments(ctx context.Context, b Blob) error {
	if _, err := o.sealLocked(ctx, b); err != nil {
		return err
	}
	s := o.segments
	for r, segs := range s.parts {
		final := s.final(r)
		if len(segs) == 0 {
			if err := b.PutIfAbsent(ctx, final, nil); err != nil && !errors.Is(err, domain.ErrExists) {
				return err
			}
			continue
		}
		if len(segs) == 1 {
			err := b.CopyIfAbsent(ctx, segs[0], b.Bucket(), final)
			switch {
			case err == nil, errors.Is(err, domain.ErrExists):
				continue
			case !errors.Is(err, ErrUnsupported): // unsupported: assembled below
				return fmt.Errorf("output partition %d from its segment: %w", r, err)
			}
		}
		if err := o.assemble(ctx, b, final, segs); err != nil {
			return fmt.Errorf("output partition %d from its %d segments: %w", r, len(segs), err)
		}
	}
	return nil
}

// assemble streams segs, in order, into the object final, a part at a
// time (an Output of its own, which streams as the task's does).
func (o *Output) assemble(ctx context.Context, b Blob, final string, segs []string) error {
	w := New(1, o.limit)
	w.partSize, w.minPart = o.partSize, o.minPart
	w.Bind(ctx, b, func(int) string { return final })
	for _, key := range segs {
		rc, err := b.Open(ctx, b.Bucket(), key, 0)
		if err != nil {
			w.abortQuiet(ctx)
			return err
		}
		_, err = io.Copy(w.Part(0), rc)
		rc.Close()
		if err != nil {
			w.abortQuiet(ctx)
			return err
		}
	}
	if err := w.Publish(ctx, b); err != nil {
		w.abortQuiet(ctx)
		return err
	}
	return nil
}

func (o *Output) abortQuiet(ctx context.Context) { o.Abort(ctx, slog.New(slog.DiscardHandler)) }

// TakeSegments makes the objects a lambda stage's function wrote, at this
// seal's segment keys (SegmentKeys) of the partitions parts, the open
// segments of those partitions, sealed by the next checkpoint or publish.
func (o *Output) TakeSegments(parts []int) error {
	if err := o.EnterSegments(nil); err != nil {
		return err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	s := o.segments
	for _, p := range slices.Sorted(slices.Values(parts)) {
		s.parts[p] = append(s.parts[p], s.seg(s.next, p))
	}
	return nil
}
