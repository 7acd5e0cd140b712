package rangeshuffle

import (
	"bufio"
	"bytes"
	"cmp"
	"container/heap"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/batchwork/batchwork/shared/blob"
)

// Blob is what a reducer calls on S3: ranged GETs of the map stage's
// runs (blob.Store's OpenRange, or a read from the start cut at end).
type Blob interface {
	OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error)
}

// Options tune a reducer's reads; zero values take the defaults.
type Options struct {
	// ReadAhead is how many bytes the first GET of a run asks for: its
	// header and, for a small run, its records (blob.DefaultShuffleReadAhead).
	ReadAhead int64
	// MergeBudget bounds the bytes of runs a merge holds at once, a chunk
	// per run (DefaultMergeBudget).
	MergeBudget int64
	// Headers keeps the runs' headers this host has read (nil: none).
	Headers *HeaderCache
	// Parallel is how many runs' headers are read at once (16).
	Parallel int
}

// DefaultMergeBudget: 64 MiB of chunks in all, each run's between 64 KiB
// and 8 MiB (a chunk is one GET: the fewer runs, the fewer GETs).
const DefaultMergeBudget = 64 << 20

const (
	minChunk = 64 << 10
	maxChunk = 8 << 20
)

// run is one map task's sorted run as a reducer sees it.
type run struct {
	key  string
	head []byte // the object's first bytes read, header included
	h    blob.RunHeader
}

// Open returns partition r (of parts) of the range shuffle whose sorted
// runs are at keys, in the manifest's order: the records of r's key range
// of every run, merged in key order (equal keys in the order of keys, then
// of each run). Its GETs: each run's header (none for a header in
// o.Headers), with read-ahead; then, of each run that has records in the
// range, the range in chunks, the first from the read-ahead when it lies
// there.
func Open(ctx context.Context, b Blob, keys []string, parts, r int, o Options) (io.ReadCloser, error) {
	if r < 0 || r >= parts {
		return nil, fmt.Errorf("partition %d of %d", r, parts)
	}
	runs, err := readHeads(ctx, b, keys, o)
	if err != nil {
		return nil, err
	}
	heads := make([]blob.RunHeader, len(runs))
	for i := range runs {
		heads[i] = runs[i].h
	}
	bounds := Boundaries(heads, parts)
	lo, hi := keyRange(bounds, r)
	if lo != nil && hi != nil && bytes.Compare(lo, hi) >= 0 {
		return io.NopCloser(bytes.NewReader(nil)), nil // an empty range: equal boundaries
	}
	chunk := min(max(cmp.Or(o.MergeBudget, DefaultMergeBudget)/int64(max(len(runs), 1)), minChunk), maxChunk)
	m := &merger{lo: lo, hi: hi}
	for i, rn := range runs {
		if rn.h.Records == 0 {
			continue
		}
		start, end := byteRange(&rn.h, lo, hi)
		if start == end {
			continue
		}
		src := &source{seq: i, r: bufio.NewReaderSize(&chunks{ctx: ctx, b: b, key: rn.key, head: rn.head, pos: start, end: end, chunk: chunk}, 16<<10)}
		m.srcs = append(m.srcs, src)
	}
	if err := m.init(); err != nil {
		return nil, err
	}
	return m, nil
}

// readHeads reads every run's header, o.Parallel at a time.
func readHeads(ctx context.Context, b Blob, keys []string, o Options) ([]run, error) {
	runs := make([]run, len(keys))
	errs := make([]error, len(keys))
	sem := make(chan struct{}, cmp.Or(o.Parallel, 16))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			runs[i], errs[i] = readHead(ctx, b, k, o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return runs, nil
}

// readHead reads a run's header: from the cache, or with one GET of the
// read-ahead (two for a header longer than it).
func readHead(ctx context.Context, b Blob, key string, o Options) (run, error) {
	if head, ok := o.Headers.get(key); ok {
		h, err := blob.DecodeRunHeader(head)
		if err != nil {
			return run{}, fmt.Errorf("%s: %w", key, err)
		}
		return run{key: key, head: head, h: h}, nil
	}
	want := max(cmp.Or(o.ReadAhead, blob.DefaultShuffleReadAhead), blob.RunPrefixLen)
	head, err := readRange(ctx, b, key, 0, want)
	if err != nil {
		return run{}, err
	}
	hl, err := blob.RunHeadLen(head)
	if err != nil {
		return run{}, fmt.Errorf("%s: %w", key, err)
	}
	if hl > int64(len(head)) {
		if int64(len(head)) < want {
			return run{}, fmt.Errorf("%s: a header of %d bytes in an object of %d: %w", key, hl, len(head), blob.ErrBadRun)
		}
		rest, err := readRange(ctx, b, key, int64(len(head)), hl)
		if err != nil {
			return run{}, err
		}
		head = append(head, rest...)
	}
	h, err := blob.DecodeRunHeader(head)
	if err != nil {
		return run{}, fmt.Errorf("%s: %w", key, err)
	}
	o.Headers.put(key, bytes.Clone(head[:h.Head])) // not the read-ahead behind it
	return run{key: key, head: head, h: h}, nil
}

// readRange reads bytes [start, end) of key, fewer if the object ends
// first.
func readRange(ctx context.Context, b Blob, key string, start, end int64) ([]byte, error) {
	rc, err := b.OpenRange(ctx, key, start, end)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf, err := io.ReadAll(io.LimitReader(rc, end-start))
	if err != nil {
		return nil, fmt.Errorf("read %s bytes %d-%d: %w", key, start, end-1, err)
	}
	return buf, nil
}

// chunks reads bytes [pos, end) of a run: from head as far as it goes,
// then a chunk per ranged GET. A run that ends early is an error.
type chunks struct {
	ctx      context.Context
	b        Blob
	key      string
	head     []byte
	pos, end int64
	chunk    int64
	buf      []byte
}

func (c *chunks) Read(p []byte) (int, error) {
	if len(c.buf) == 0 {
		if c.pos >= c.end {
			return 0, io.EOF
		}
		if c.pos < int64(len(c.head)) {
			c.buf = c.head[c.pos:min(c.end, int64(len(c.head)))]
		} else {
			want := min(c.pos+c.chunk, c.end)
			buf, err := readRange(c.ctx, c.b, c.key, c.pos, want)
			if err != nil {
				return 0, err
			}
			if int64(len(buf)) != want-c.pos {
				return 0, fmt.Errorf("%s: bytes %d-%d: the object ended after %d: %w", c.key, c.pos, want-1, len(buf), blob.ErrBadRun)
			}
			c.buf = buf
		}
		c.pos += int64(len(c.buf))
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

// source is one run's records in the range, read a line at a time.
type source struct {
	seq  int // the run's place among the keys: ties go to the lower
	r    *bufio.Reader
	line []byte // the current record, "key\tvalue\n"
	key  []byte
	long []byte // a record longer than r's buffer, gathered here
}

// next reads the source's next record; false at its end.
func (s *source) next() (bool, error) {
	line, err := s.r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		s.long = append(s.long[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.r.ReadSlice('\n')
			s.long = append(s.long, line...)
		}
		line = s.long
	}
	switch {
	case err == io.EOF && len(line) == 0:
		return false, nil
	case err == io.EOF:
		return false, fmt.Errorf("a record without its newline: %w", blob.ErrBadRun)
	case err != nil:
		return false, err
	}
	s.line, s.key = line, blob.RunKey(line)
	return true, nil
}

// merger merges its sources' records of keys [lo, hi) in key order.
type merger struct {
	lo, hi []byte
	srcs   []*source
	h      srcHeap
	out    []byte // what is left of the record being read
	err    error
}

// init reads each source's first record in the range.
func (m *merger) init() error {
	for _, s := range m.srcs {
		ok, err := m.advance(s)
		if err != nil {
			return err
		}
		if ok {
			m.h = append(m.h, s)
		}
	}
	heap.Init(&m.h)
	return nil
}

// advance moves s to its next record in the range; false past it.
func (m *merger) advance(s *source) (bool, error) {
	for {
		ok, err := s.next()
		if !ok || err != nil {
			return false, err
		}
		if m.lo != nil && bytes.Compare(s.key, m.lo) < 0 {
			continue // before the range: the sparse index's slack
		}
		return m.hi == nil || bytes.Compare(s.key, m.hi) < 0, nil
	}
}

func (m *merger) Read(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if len(m.out) == 0 {
			if m.err != nil {
				return n, m.err
			}
			if len(m.h) == 0 {
				if n > 0 {
					return n, nil
				}
				return 0, io.EOF
			}
			s := m.h[0]
			m.out = append(m.out[:0], s.line...)
			ok, err := m.advance(s)
			switch {
			case err != nil:
				m.err, m.h = err, nil
			case ok:
				heap.Fix(&m.h, 0)
			default:
				heap.Pop(&m.h)
			}
		}
		k := copy(p, m.out)
		m.out, p, n = m.out[k:], p[k:], n+k
	}
	return n, nil
}

func (m *merger) Close() error { return nil }

// srcHeap orders sources by their current key, then by seq.
type srcHeap []*source

func (h srcHeap) Len() int { return len(h) }
func (h srcHeap) Less(i, j int) bool {
	if c := bytes.Compare(h[i].key, h[j].key); c != 0 {
		return c < 0
	}
	return h[i].seq < h[j].seq
}
func (h srcHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *srcHeap) Push(x any)   { *h = append(*h, x.(*source)) }
func (h *srcHeap) Pop() any {
	old := *h
	s := old[len(old)-1]
	*h = old[:len(old)-1]
	return s
}
