package split

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/batchwork/batchwork/shared/split/parquet"
)

// SizeFunc returns the size of object key as the split's reads see it (the
// planned version, when reads are pinned). A Parquet reader needs it: the
// file's footer, which says where its row groups are, is at its end.
type SizeFunc func(ctx context.Context, key string) (int64, error)

// openParquet opens a Parquet split: the rows of the row groups that
// start in [s.Start, s.End), as JSON Lines (shared/split/parquet).
func openParquet(ctx context.Context, open RangeOpener, s Split, o Options) (io.ReadCloser, error) {
	if c := Compression(s.Key); c != "" {
		return nil, corrupt(fmt.Errorf("split: %q is named as %s-compressed, which Parquet is not: a Parquet file compresses its pages itself", s.Key, c))
	}
	if o.Size == nil {
		return nil, errors.New("split: reading Parquet needs the object's size (Options.Size)")
	}
	size, err := o.Size(ctx, s.Key)
	if err != nil {
		return nil, fmt.Errorf("split: size of %q: %w", s.Key, err)
	}
	if size < s.End {
		return nil, fmt.Errorf("split: %q is %d bytes, shorter than its planned range [%d, %d): it changed since planning", s.Key, size, s.Start, s.End)
	}
	ra := &rangeReaderAt{ctx: ctx, open: open, key: s.Key, size: size}
	rc, err := parquet.Open(ctx, ra, size, s.Key, s.Start, s.End, o.Columns)
	if err != nil {
		ra.Close()
		return nil, ra.classify(err)
	}
	return &parquetRows{ReadCloser: rc, ra: ra}, nil
}

// parquetRows reads a split's rows and closes its streams with it.
type parquetRows struct {
	io.ReadCloser
	ra *rangeReaderAt
}

func (p *parquetRows) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if err != nil && !errors.Is(err, io.EOF) {
		err = p.ra.classify(err)
	}
	return n, err
}

func (p *parquetRows) Close() error { return errors.Join(p.ReadCloser.Close(), p.ra.Close()) }

// Bounds of rangeReaderAt's streams.
const (
	// maxStreams bounds the streams open at once: a row group's column
	// chunks are read interleaved, each front to back, so each selected
	// column keeps its own stream; beyond this, the least recently used
	// one is closed and reopened when next needed.
	maxStreams = 32
	// maxSkip is how far a stream reads ahead and discards to reach an
	// offset rather than open another stream there.
	maxSkip = 64 << 10
)

// rangeReaderAt reads an object at random offsets through a RangeOpener:
// each read continues a stream already open just before its offset, or
// opens one (a ranged GET from there). Readers that move front to back
// each cost one GET however many reads they make.
type rangeReaderAt struct {
	ctx     context.Context
	open    RangeOpener
	key     string
	size    int64
	mu      sync.Mutex
	streams []*stream // most recently used last
	// failed is the first error a read returned other than io.EOF: a
	// decoding error after it may come from the failed read, not from
	// the object's bytes.
	failed error
}

// classify marks a Parquet decoding error as the object's (ErrCorruptInput)
// unless a read failed or the context ended: the decoder reports every
// error as its own, so only a clean read history says the bytes are bad.
func (r *rangeReaderAt) classify(err error) error {
	r.mu.Lock()
	failed := r.failed
	r.mu.Unlock()
	if failed != nil || r.ctx.Err() != nil {
		return err
	}
	return corrupt(err)
}

// fail records a read's error; r.mu is held.
func (r *rangeReaderAt) fail(err error) {
	if r.failed == nil {
		r.failed = err
	}
}

type stream struct {
	rc  io.ReadCloser
	pos int64
}

func (r *rangeReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		// Only a corrupt footer points before the file: the object's error.
		return 0, fmt.Errorf("split: read %q at %d", r.key, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	want := p
	if rest := r.size - off; int64(len(p)) > rest {
		want = p[:rest]
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s, err := r.stream(off)
	if err != nil {
		r.fail(err)
		return 0, err
	}
	n, err := io.ReadFull(s.rc, want)
	s.pos += int64(n)
	if err != nil {
		r.drop(s)
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			err = fmt.Errorf("split: %q ended at %d, before its size %d: it changed since planning", r.key, off+int64(n), r.size)
		}
		r.fail(err)
		return n, err
	}
	if len(want) < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// stream returns a stream positioned at off, most recently used now.
func (r *rangeReaderAt) stream(off int64) (*stream, error) {
	for i, s := range r.streams {
		if s.pos > off || off-s.pos > maxSkip {
			continue
		}
		r.streams = append(append(r.streams[:i:i], r.streams[i+1:]...), s)
		if skip := off - s.pos; skip > 0 {
			n, err := io.CopyN(io.Discard, s.rc, skip)
			s.pos += n
			if err != nil {
				r.drop(s)
				return nil, fmt.Errorf("split: read %q at %d: %w", r.key, s.pos, err)
			}
		}
		return s, nil
	}
	if err := r.ctx.Err(); err != nil {
		return nil, err
	}
	rc, err := r.open(r.ctx, r.key, off)
	if err != nil {
		return nil, fmt.Errorf("split: open %q at %d: %w", r.key, off, err)
	}
	if len(r.streams) == maxStreams {
		r.drop(r.streams[0])
	}
	s := &stream{rc: rc, pos: off}
	r.streams = append(r.streams, s)
	return s, nil
}

func (r *rangeReaderAt) drop(s *stream) {
	for i, t := range r.streams {
		if t == s {
			r.streams = append(r.streams[:i], r.streams[i+1:]...)
			break
		}
	}
	s.rc.Close()
}

// Close closes every open stream.
func (r *rangeReaderAt) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for _, s := range r.streams {
		errs = append(errs, s.rc.Close())
	}
	r.streams = nil
	return errors.Join(errs...)
}
