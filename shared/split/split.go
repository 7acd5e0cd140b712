// Package split partitions S3 input into byte ranges, one per task, and
// reads back exactly the records a range owns.
//
// Planning is not record aware: it only needs object names and sizes, so
// it never reads data. Record boundaries are settled when a task reads its
// range: a task owns every record whose first byte lies in [Start, End),
// so each record of an object belongs to exactly one split however the
// cuts fall. A record is a line (formats lines and jsonl) or a CSV record,
// which may span lines inside quotes (see format.go). A compressed object
// (.gz, .zst) cannot be entered mid-stream, so it is one whole-file split.
package split

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Object is an input object and its size in bytes.
type Object struct {
	Key  string
	Size int64
	// ETag is the object's entity tag as listed, without its quotes; ""
	// if the listing gave none.
	ETag string
	// Version is the object's S3 version id when its bucket is versioned
	// and the planner pinned it (blob.Store.PinVersions); "" otherwise.
	Version string
}

// Split is the work of one task: the lines of object Key whose first byte
// lies in [Start, End).
type Split struct {
	Key        string
	Start, End int64
	// ETag pins the object as planned (blob.Store.OpenPinned): a reader
	// fails rather than read another version of it. "" reads whatever is there (a plan made
	// before pinning, or a listing without ETags).
	ETag string `json:",omitempty"`
	// Version, when set, pins the exact object version as planned on a
	// versioned bucket (blob.Store.OpenPinnedVersion): a reader reads that
	// version even after the key is overwritten, and fails only if the
	// version itself is gone.
	Version string `json:",omitempty"`
	// Source is the index of the stage's input the object was listed
	// under (spec.Partitions.InputAt): 0 for a stage with one input.
	Source int `json:",omitempty"`
}

// Plan cuts each non-empty object, in the given order, into
// ceil(Size/target) byte ranges whose sizes differ by at most one byte.
// A target ≤ 0 yields one split per object, and so does a compressed
// object (Compression), whatever its size. Plan is deterministic.
func Plan(objs []Object, target int64) []Split {
	out := make([]Split, 0, Count(objs, target))
	for _, o := range objs {
		n := pieces(o, target)
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
			out = append(out, Split{Key: o.Key, Start: start, End: end, ETag: o.ETag, Version: o.Version})
		}
	}
	return out
}

// Count returns len(Plan(objs, target)) without building the splits, so a
// caller can enforce a task limit before planning.
func Count(objs []Object, target int64) int64 {
	var n int64
	for _, o := range objs {
		n += pieces(o, target)
	}
	return n
}

func pieces(o Object, target int64) int64 {
	size := o.Size
	switch {
	case size <= 0:
		return 0
	case target <= 0, Compression(o.Key) != "":
		// A compressed stream can only be decoded from its start.
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
// even past End. A compressed object is decompressed (see OpenFormat).
// The caller must Close the result.
func Open(ctx context.Context, open RangeOpener, s Split) (io.ReadCloser, error) {
	rc, _, err := OpenFormat(ctx, open, s, Options{})
	return rc, err
}

// openRange opens the uncompressed object of s one byte before Start: if
// that byte ends a record, the record at Start is ours; otherwise the
// record running through Start belongs to the previous split, and the
// caller skips past it (skipPartialLine). The buffer holds at least
// minBuf bytes, so that Peek(minBuf) works.
func openRange(ctx context.Context, open RangeOpener, s Split, csv bool, minBuf int) (*lineReader, error) {
	from := max(s.Start-1, 0)
	rc, err := open(ctx, s.Key, from)
	if err != nil {
		return nil, fmt.Errorf("split: open %q at %d: %w", s.Key, from, err)
	}
	size := max(int(min(max(s.End-s.Start+1, minBufSize), bufSize)), minBuf)
	return &lineReader{
		ctx: ctx,
		rc:  rc,
		br:  bufio.NewReaderSize(rc, size),
		pos: from,
		end: s.End,
		csv: csv,
	}, nil
}

// lineReader streams whole records starting before end. A record is a
// line, or with csv set a CSV record, whose newlines inside quotes do not
// end it.
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
	midLine bool
	// csv: a '\n' ends a record only outside quotes, and odd says whether
	// the quotes read since the record began leave us inside a quoted
	// field. Counting suffices: in RFC 4180 a field's quotes come in pairs
	// ("" inside a quoted field, and the two that delimit it).
	csv      bool
	odd      bool
	done     bool  // no more data: return err
	err      error // io.EOF or the failure that ended the stream
	closeErr error
	// cut, when set, may move end while the split is read (cut.go).
	cut *Cut
}

// attachCut lets c move the reader's end from now on.
func (r *lineReader) attachCut(c *Cut, start int64) {
	if c == nil || r.done {
		return
	}
	r.cut = c
	c.attach(start, r.pos, r.end)
}

// skipPartialLine consumes the byte before Start and, unless it ends a
// record, the rest of the record it belongs to.
func (r *lineReader) skipPartialLine() error {
	for skipping := true; skipping; {
		chunk, err := r.br.ReadSlice('\n')
		r.pos += int64(len(chunk))
		r.countQuotes(chunk)
		switch {
		case r.endsRecord(chunk):
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
	if !r.midLine && r.cut != nil {
		// A record starts here: whose it is may have changed.
		end, err := r.cut.limit(r.ctx, r.pos)
		if err != nil {
			return err
		}
		r.end = min(r.end, end) // a cut only ever moves it earlier
	}
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
	r.countQuotes(chunk)
	r.midLine = len(chunk) > 0 && !r.endsRecord(chunk)
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

// countQuotes keeps odd up to date with a chunk just read.
func (r *lineReader) countQuotes(chunk []byte) {
	if r.csv && bytes.Count(chunk, quote)%2 == 1 {
		r.odd = !r.odd
	}
}

var quote = []byte{'"'}

// endsRecord reports whether a chunk just read (and counted) ends a
// record: it ends with a newline, outside quotes.
func (r *lineReader) endsRecord(chunk []byte) bool {
	return len(chunk) > 0 && chunk[len(chunk)-1] == '\n' && !r.odd
}

// finish ends the stream with err once pending is drained, and releases
// the underlying reader right away rather than when the caller closes.
func (r *lineReader) finish(err error) {
	r.done, r.err = true, err
	if r.cut != nil {
		r.cut.finish()
	}
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
	if r.cut != nil {
		r.cut.finish()
	}
	r.release()
	r.done = true
	if r.err == nil {
		r.err = errors.New("split: read after Close")
	}
	r.pending = nil
	return r.closeErr
}
