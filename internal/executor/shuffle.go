package executor

// The one-PUT shuffle (shared/blob/shuffle.go has the object's layout and
// why its index is in the object). A map task of a shuffle stage with more
// than one partition buffers its partitions (all of them, under the
// attempt's cap on buffered outputs, tuning.MaxTaskOutput) and writes them
// as one indexed object after the function returns: one PUT whatever the
// number of reducers, with If-None-Match: * at the attempt's own key
// (output part 0), and the commit, which comes after it, names that one
// output. A reducer finds, in the stage's manifest, one output per map task
// and reads its slice of each with ranged GETs.
//
// The per-part layout (one object per partition) stays, and its readers
// with it, for:
//   - jobs that ran before this layout: their manifests list P outputs per
//     map task, and reducers read them as before;
//   - a shuffle feeding a lambda stage: the function is told whole objects
//     to read (lambdatask.Shuffle.Keys), so its upstream writes whole objects;
//   - a lambda stage's own outputs: its function writes one object per
//     partition itself;
//   - a map task whose buffered outputs would pass the cap: rather than
//     fail, it switches to streaming each partition as output.Output does (a
//     task that writes over 256 MiB pays P PUTs or multipart uploads on
//     that much data, where they are cheap). Only a shuffle of many
//     partitions, each under S3's 5 MiB minimum part, is then refused, as
//     before.
// A map task that writes no bytes writes no object and commits none.
//
// A reducer's GETs: one per map output for its slice, the index coming
// with it in the first GET's read-ahead (blob.OpenShuffleSlice), and a
// second only for a slice past the read-ahead. The runner keeps the
// indexes it read (indexCache), so the next reducers on the same host
// GET only non-empty slices, each with one request.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// indexedShuffle reports whether stage idx's tasks write their shuffle
// partitions as one indexed object.
func indexedShuffle(sp *spec.Job, idx int) bool {
	st := sp.Stages[idx]
	if st.Shuffle == nil || st.Shuffle.Partitions <= 1 || st.Lambda != "" {
		return false
	}
	for i, d := range sp.Stages {
		if d.Lambda != "" && slices.Contains(sp.ShuffleSources(i), idx) {
			return false
		}
	}
	return true
}

// shuffleSource is one object a reducer reads: a whole object of the
// per-part layout (parts 0), or its slice of an indexed object of parts
// partitions.
type shuffleSource struct {
	key   string
	parts int
	task  int // the map task that wrote it (skewinput.go)
}

// shuffleSources lists what partition ref.Partition of stage src's
// shuffle is, from the stage's manifest: of each committed map task, its
// output ref.Partition (per-part layout) or its slice of its one indexed
// object. A manifest lists a task's outputs together, in part order, so
// one task is looked at at a time (a paged manifest is read a page at a
// time; shuffleKeys' comment).
func (r *Runner) shuffleSources(ctx context.Context, sp *spec.Job, ref domain.TaskRef, src int) ([]shuffleSource, error) {
	m, err := r.stageManifest(ctx, blob.StageManifestKey(ref.Job, sp.Stages[src].Name))
	if err != nil {
		return nil, err
	}
	parts := 1
	if sh := sp.Stages[src].Shuffle; sh != nil {
		parts = sh.Partitions
	}
	var out []shuffleSource
	// The task being looked at: its first output, how many it has, and
	// the one of this partition if it has it.
	var first domain.Output
	n, mine := 0, ""
	done := func() {
		switch {
		case n == 0:
		case blob.ShuffleIndexed(parts, n):
			out = append(out, shuffleSource{key: first.Key, parts: parts, task: first.Partition})
		case mine != "":
			out = append(out, shuffleSource{key: mine, task: first.Partition})
		}
	}
	err = blob.EachManifestOutput(ctx, r.Blob, m, func(o domain.Output) error {
		if n == 0 || o.Partition != first.Partition || o.Stage != first.Stage {
			done()
			first, n, mine = o, 0, ""
		}
		n++
		if o.Part == ref.Partition {
			mine = o.Key
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	done()
	return out, nil
}

// stageManifest reads a stage's manifest, once per runner: a paged one's
// is its short index.
func (r *Runner) stageManifest(ctx context.Context, key string) (domain.Manifest, error) {
	if v, ok := r.manifests.Load(key); ok {
		return *v.(*domain.Manifest), nil
	}
	m, err := blob.ReadManifest(ctx, r.Blob, key)
	if err != nil {
		return domain.Manifest{}, err
	}
	r.manifests.Store(key, &m)
	return m, nil
}

// shuffleReader streams a reducer's sources one after another, opening
// each when the one before is read.
type shuffleReader struct {
	ctx       context.Context
	blob      Blob
	part      int
	readAhead int64
	srcs      []shuffleSource
	cur       io.ReadCloser
	cache     *indexCache // nil: none
}

// open opens a source: a whole object; or a slice, with the object's
// index from the cache (one GET, none for an empty slice) or read with
// the slice's first bytes (one GET, two for a slice past the read-ahead).
func (s *shuffleReader) open(src shuffleSource) (io.ReadCloser, error) {
	if src.parts == 0 {
		return s.blob.Open(s.ctx, s.blob.Bucket(), src.key, 0)
	}
	g := rangeGetter(s.blob)
	if offs, ok := s.cache.get(src.key); ok && len(offs) == src.parts+1 {
		return blob.OpenShuffleRange(s.ctx, g, src.key, nil, offs[s.part], offs[s.part+1])
	}
	head, err := blob.ReadShuffleHead(s.ctx, g, src.key, s.part, s.readAhead)
	if err != nil {
		return nil, err
	}
	start, end, err := blob.ShuffleRange(head, src.parts, s.part)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", src.key, err)
	}
	if offs, ok := blob.ShuffleOffsets(head, src.parts); ok {
		s.cache.put(src.key, offs)
	}
	return blob.OpenShuffleRange(s.ctx, g, src.key, head, start, end)
}

// indexCacheBytes bounds the offsets an indexCache holds: 8 MiB, the
// indexes of 16,000 map outputs of 64 partitions.
const indexCacheBytes = 8 << 20

// indexCache keeps the indexes of the indexed objects a runner's reducers
// have read, so the next reducer on this host to read the same map output
// skips the index: one ranged GET for its slice, none if the slice is
// empty. An object's key names its attempt and the object is written
// once, so an entry never goes stale. Only whole indexes that came with a
// first GET are kept (an index within that GET's read-ahead); when the
// bound is reached the cache starts over (a job's reducers read one
// stage's outputs; older entries are most likely a finished job's).
type indexCache struct {
	mu    sync.Mutex
	m     map[string][]int64
	bytes int64
	limit int64 // 0: indexCacheBytes
}

func (c *indexCache) get(key string) ([]int64, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	offs, ok := c.m[key]
	return offs, ok
}

func (c *indexCache) put(key string, offs []int64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	size := int64(8*len(offs) + len(key))
	limit := cmp.Or(c.limit, indexCacheBytes)
	if size > limit {
		return
	}
	if _, ok := c.m[key]; ok {
		return
	}
	if c.m == nil || c.bytes+size > limit {
		c.m, c.bytes = map[string][]int64{}, 0
	}
	c.m[key] = offs
	c.bytes += size
}

func (s *shuffleReader) Read(p []byte) (int, error) {
	for {
		if s.cur == nil {
			if len(s.srcs) == 0 {
				return 0, io.EOF
			}
			rc, err := s.open(s.srcs[0])
			if err != nil {
				return 0, err
			}
			s.cur, s.srcs = rc, s.srcs[1:]
		}
		n, err := s.cur.Read(p)
		if err == io.EOF {
			s.cur.Close()
			s.cur = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (s *shuffleReader) Close() error {
	if s.cur != nil {
		return s.cur.Close()
	}
	return nil
}

// rangeGetter is b's ranged GET, or for a Blob without one
// (ErrUnsupported) a read from start cut at end.
func rangeGetter(b Blob) blob.RangeGetter { return openRange{b} }

type openRange struct{ b Blob }

func (o openRange) OpenRange(ctx context.Context, key string, start, end int64) (io.ReadCloser, error) {
	if rc, err := o.b.OpenRange(ctx, key, start, end); !errors.Is(err, ErrUnsupported) {
		return rc, err
	}
	rc, err := o.b.Open(ctx, o.b.Bucket(), key, start)
	if err != nil {
		return nil, err
	}
	return struct {
		io.Reader
		io.Closer
	}{io.LimitReader(rc, end-start), rc}, nil
}
