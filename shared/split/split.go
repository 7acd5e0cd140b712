// Package split partitions line-oriented S3 input into byte ranges, one
// per task, and reads back exactly the lines a range owns.
//
// Planning is not line aware: it only needs object sizes, so it never
// reads data. Line boundaries are settled when a task reads its range: a
// task owns every line whose first byte lies in [Start, End), so each line
// of an object belongs to exactly one split however the cuts fall.
package split

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
)

// Object is an input object and its size in bytes.
type Object struct {
	Key  string
	Size int64
}

// Split is the work of one task: the lines of object Key whose first byte
// lies in [Start, End).
type Split struct {
	Key        string
	Start, End int64
}

// Plan cuts each non-empty object, in the given order, into
// ceil(Size/target) byte ranges whose sizes differ by at most one byte.
// A target ≤ 0 yields one split per object. Plan is deterministic.
func Plan(objs []Object, target int64) []Split {
	out := make([]Split, 0, Count(objs, target))
	for _, o := range objs {
		n := pieces(o.Size, target)
		if n == 0 {
			continue
		}
		// The first r pieces get one extra byte. Computing offsets as
		// k*q + min(k, r) rather than k*Size/n cannot overflow.
		q, r := o.Size/n, o.Size%n
		for k := range n {
			start := k*q + min(k, r)
			end := start + q
			if k < r {
				end++
			}
			out = append(out, Split{Key: o.Key, Start: start, End: end})
		}
	}
	return out
}

// Count returns len(Plan(objs, target)) without building the splits, so a
// caller can enforce a task limit before planning.
func Count(objs []Object, target int64) int64 {
	var n int64
	for _, o := range objs {
		n += pieces(o.Size, target)
	}
	return n
}

func pieces(size, target int64) int64 {
	switch {
	case size <= 0:
		return 0
	case target <= 0:
		return 1
	}
	n := size / target
	if size%target != 0 {
		n++
	}
	return n
}

// RangeOpener opens object key for reading from byte offset start to the
// end of the object. An S3 implementation issues a GetObject with
// "Range: bytes=start-".
type RangeOpener func(ctx context.Context, key string, start int64) (io.ReadCloser, error)

// Read buffer bounds. A large buffer makes reading a big range cost few
// reads of the underlying (network) stream; a small split gets a small
// buffer, as it reads little anyway. Lines longer than the buffer are
// fine: they are streamed in pieces.
const (
	minBufSize = 4 << 10
	bufSize    = 64 << 10
)

// Open returns a stream of exactly the lines split s owns, each with its
// '\n' terminator (the last line of an object may have none). It reads
// the object sequentially and stops, closing the underlying reader, after
// the last owned line; a line that starts before End is read to its end
// even past End. The caller must Close the result.
func Open(ctx context.Context, open RangeOpener, s Split) (io.ReadCloser, error) {
	if s.Start < 0 || s.End < s.Start {
		return nil, fmt.Errorf("split: invalid range [%d, %d) of %q", s.Start, s.End, s.Key)
	}
	if s.Start == s.End {
		return &lineReader{done: true, err: io.EOF}, nil
	}
	// Open one byte early: if the byte before Start ends a line, the line
	// at Start is ours; otherwise the line running through Start belongs
	// to the previous split and we skip past it.
	from := max(s.Start-1, 0)
	rc, err := open(ctx, s.Key, from)
	if err != nil {
		return nil, fmt.Errorf("split: open %q at %d: %w", s.Key, from, err)
	}
	r := &lineReader{
		ctx: ctx,
		rc:  rc,
		br:  bufio.NewReaderSize(rc, int(min(max(s.End-s.Start+1, minBufSize), bufSize))),
		pos: from,
		end: s.End,
	}
	if s.Start > 0 {
		if err := r.skipPartialLine(); err != nil {
			rc.Close()
			return nil, fmt.Errorf("split: read %q at %d: %w", s.Key, from, err)
		}
	}
	return r, nil
}

// lineReader streams whole lines starting before end.
type lineReader struct {
	ctx context.Context
	rc  io.ReadCloser // nil once closed
	br  *bufio.Reader
	// pos is the object offset of the next byte br will return.
	pos int64
	end int64
	// pending is the unreturned rest of the last chunk read from br.
	pending []byte
	// midLine is set while pending or br continue a line that started
	// before end, which must be emitted whole.
	midLine  bool
	done     bool  // no more data: return err
	err      error // io.EOF or the failure that ended the stream
	closeErr error
}

// skipPartialLine consumes the byte before Start and, unless it is a
// newline, the rest of the line it belongs to.
func (r *lineReader) skipPartialLine() error {
	for skipping := true; skipping; {
		chunk, err := r.br.ReadSlice('\n')
		r.pos += int64(len(chunk))
		switch {
		case len(chunk) > 0 && chunk[len(chunk)-1] == '\n':
			skipping = false
		case errors.Is(err, io.EOF):
			r.finish(io.EOF) // the object ends inside that line
			return nil
		case err != nil && !errors.Is(err, bufio.ErrBufferFull):
			return err
		}
	}
	if r.pos >= r.end {
		r.finish(io.EOF)
	}
	return nil
}

func (r *lineReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.done {
			return 0, r.err
		}
		if err := r.fill(); err != nil {
			r.finish(err)
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// fill reads the next chunk of an owned line into pending, or finishes the
// stream when the next line is not owned.
func (r *lineReader) fill() error {
	if !r.midLine && r.pos >= r.end {
		return io.EOF
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	// ReadSlice returns at most one line, or a buffer-full prefix of a
	// long one; the slice stays valid until the next read from br, which
	// happens only after pending is drained.
	chunk, err := r.br.ReadSlice('\n')
	r.pos += int64(len(chunk))
	r.pending = chunk
	r.midLine = len(chunk) > 0 && chunk[len(chunk)-1] != '\n'
	switch {
	case err == nil, errors.Is(err, bufio.ErrBufferFull):
		return nil
	case errors.Is(err, io.EOF):
		// The last line of the object has no terminator; emit what was
		// read, then stop.
		r.midLine = false
		r.end = r.pos
		if len(chunk) == 0 {
			return io.EOF
		}
		return nil
	default:
		return err
	}
}

// finish ends the stream with err once pending is drained, and releases
// the underlying reader right away rather than when the caller closes.
func (r *lineReader) finish(err error) {
	r.done, r.err = true, err
	r.release()
}

func (r *lineReader) release() {
	if r.rc != nil {
		r.closeErr = r.rc.Close()
		r.rc = nil
	}
}

// Close releases the underlying reader. It is safe to call more than once.
func (r *lineReader) Close() error {
	r.release()
	r.done = true
	if r.err == nil {
		r.err = errors.New("split: read after Close")
	}
	r.pending = nil
	return r.closeErr
}
