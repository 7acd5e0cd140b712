package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

// committedParts reads the parts partitions a committed attempt (task
// partition 0, attempt 1 of stage in job j1) wrote, whatever the layout:
// one indexed object, or one object per partition; "" for a partition
// with nothing, including every partition of an attempt that wrote no
// object.
func committedParts(t *testing.T, b *testdouble.Blob, stage string, parts int) []string {
	t.Helper()
	ctx := context.Background()
	out := make([]string, parts)
	first, err := b.Get(ctx, blob.OutputKey("j1", stage, 0, 1, 0))
	if errors.Is(err, domain.ErrNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	if parts > 1 && bytes.HasPrefix(first, []byte(blob.ShuffleMagic)) {
		for r := range parts {
			s, e, err := blob.ShuffleRange(first, parts, r)
			if err != nil {
				t.Fatalf("partition %d: %v", r, err)
			}
			out[r] = string(first[s:e])
		}
		return out
	}
	for r := range parts {
		body, err := b.Get(ctx, blob.OutputKey("j1", stage, 0, 1, r))
		if err != nil {
			t.Fatalf("part %d: %v", r, err)
		}
		out[r] = string(body)
	}
	return out
}

// rangedBlob is S3 with objects and ranged GETs, as S3 serves them: a
// range past the end is cut at the end. Its journal shows the GETs and
// puts asked for.
func rangedBlob(log *testdouble.Journal) *testdouble.Blob {
	return blobWith(log, []testdouble.Capability{testdouble.RangeReads})
}

// ranges are the ranged GETs journaled in log from entry from on, each
// "key start-end".
func ranges(log *testdouble.Journal, from int) []string {
	var out []string
	for _, e := range log.All()[from:] {
		if r, ok := strings.CutPrefix(e, "range "); ok {
			out = append(out, r)
		}
	}
	return out
}

// puts counts the objects put, as journaled in log.
func puts(log *testdouble.Journal) int {
	n := 0
	for _, e := range log.All() {
		if strings.HasPrefix(e, "put ") {
			n++
		}
	}
	return n
}

// The indexed object holds each partition at the range its index gives,
// exactly: empty partitions, one partition, 64; and reading a slice with
// OpenShuffleSlice gives the partition back with one GET when it lies in
// the read-ahead, two when it does not, and one for an empty slice.
func TestShuffleObjectRanges(t *testing.T) {
	t.Parallel()
	mk := func(n int, f func(r int) string) [][]byte {
		out := make([][]byte, n)
		for r := range out {
			out[r] = []byte(f(r))
		}
		return out
	}
	cases := []struct {
		name      string
		parts     [][]byte
		readAhead int64
	}{
		{"all empty", mk(4, func(int) string { return "" }), 1 << 10},
		{"one partition", mk(1, func(int) string { return "a\t1\nb\t2\n" }), 1 << 10},
		{"some empty", mk(5, func(r int) string { return strings.Repeat(fmt.Sprintf("k%d\tv\n", r), r%2*3) }), 1 << 10},
		{"64 partitions", mk(64, func(r int) string { return strings.Repeat(fmt.Sprintf("w%d\t%d\n", r, r), r) }), 1 << 10},
		{"64 partitions, no read-ahead", mk(64, func(r int) string { return strings.Repeat(fmt.Sprintf("w%d\t%d\n", r, r), r) }), 0},
		{"64 partitions, read-ahead in a slice", mk(64, func(r int) string { return strings.Repeat("x", 100) }), 150},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			P := len(tc.parts)
			body, size := blob.ShuffleBody(tc.parts)
			raw, err := io.ReadAll(body)
			if err != nil {
				t.Fatal(err)
			}
			want := blob.ShuffleHeaderLen(P)
			for _, p := range tc.parts {
				want += int64(len(p))
			}
			if size != want || int64(len(raw)) != size {
				t.Fatalf("object of %d bytes (read %d), want header and partitions, %d", size, len(raw), want)
			}
			// Seeking back gives the same bytes (the SDK re-reads a body
			// to sign it and to retry).
			if _, err := body.Seek(0, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			again, _ := io.ReadAll(body)
			if !bytes.Equal(again, raw) {
				t.Fatal("the body reads differently the second time")
			}
			next := blob.ShuffleHeaderLen(P)
			for r, p := range tc.parts {
				s, e, err := blob.ShuffleRange(raw, P, r)
				if err != nil {
					t.Fatal(err)
				}
				if s != next || e != s+int64(len(p)) || !bytes.Equal(raw[s:e], p) {
					t.Fatalf("partition %d at [%d, %d), want [%d, %d) holding it", r, s, e, next, next+int64(len(p)))
				}
				next = e
				// The index up to r+1 is enough.
				if s2, e2, err := blob.ShuffleRange(raw[:blob.ShuffleIndexPrefix(r)], P, r); err != nil || s2 != s || e2 != e {
					t.Fatalf("partition %d from its index prefix: [%d, %d) %v", r, s2, e2, err)
				}
			}
			log := &testdouble.Journal{}
			b := rangedBlob(log)
			const key = "obj"
			if err := b.PutIfAbsent(ctx, key, raw); err != nil {
				t.Fatal(err)
			}
			for r, p := range tc.parts {
				from := len(log.All())
				rc, err := blob.OpenShuffleSlice(ctx, b, key, P, r, tc.readAhead)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(rc)
				rc.Close()
				if err != nil || !bytes.Equal(got, p) {
					t.Fatalf("partition %d read %q (%v), want %q", r, got, err, p)
				}
				s, e, _ := blob.ShuffleRange(raw, P, r)
				first := blob.ShuffleIndexPrefix(r) + tc.readAhead
				wantRanges := []string{fmt.Sprintf("%s 0-%d", key, first)}
				if e > first && e > s {
					wantRanges = append(wantRanges, fmt.Sprintf("%s %d-%d", key, max(s, min(first, size)), e))
				}
				if diff := gocmp.Diff(wantRanges, ranges(log, from)); diff != "" {
					t.Errorf("partition %d: GETs (-want +got):\n%s", r, diff)
				}
			}
		})
	}
}

// An object that is not an indexed shuffle object, or is cut short, is an
// error, never a partition read wrong.
func TestShuffleObjectMalformed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	body, size := blob.ShuffleBody([][]byte{[]byte("a\t1\n"), []byte("b\t2\n"), []byte("c\t3\n")})
	raw := make([]byte, size)
	body.ReadAt(raw, 0)
	log := &testdouble.Journal{}
	b := rangedBlob(log)
	b.PutIfAbsent(ctx, "plain", []byte("a\t1\nb\t2\n"+strings.Repeat("x", 100)))
	b.PutIfAbsent(ctx, "three", raw)
	b.PutIfAbsent(ctx, "cut", raw[:len(raw)-2])
	for _, tc := range []struct {
		key         string
		parts, r    int
		readAhead   int64
		failsOnRead bool
	}{
		{"plain", 3, 0, 0, false},
		{"three", 4, 0, 0, false}, // the count does not match the spec's
		{"three", 3, 3, 0, false}, // no such partition
		{"cut", 3, 2, 0, true},    // the slice ends early
	} {
		rc, err := blob.OpenShuffleSlice(ctx, b, tc.key, tc.parts, tc.r, tc.readAhead)
		if err == nil {
			_, err = io.ReadAll(rc)
			rc.Close()
			if !tc.failsOnRead {
				t.Errorf("%s: opened partition %d of %d", tc.key, tc.r, tc.parts)
			}
		}
		if !errors.Is(err, blob.ErrBadShuffleObject) {
			t.Errorf("%s partition %d of %d: %v, want ErrBadShuffleObject", tc.key, tc.r, tc.parts, err)
		}
	}
}

const shuffle64 = `{"name":"wc","stages":[` +
	`{"name":"map","task":"m","partitions":{"count":5},"shuffle":{"partitions":64}},` +
	`{"name":"reduce","task":"r","after":["map"]}]}`

// End to end through the runner: map tasks with 64 partitions write one
// object each (one PUT; none for a map that writes nothing), commit one
// output, and count their records; each reducer's input, read from a
// manifest that lists one output per map task (in pages or not), is the
// concatenation of its partition of every map's output, in map order,
// and an empty slice costs no second GET.
func TestIndexedShuffleEndToEnd(t *testing.T) {
	t.Parallel()
	const maps, parts = 5, 64
	emitted := func(m int) map[int]string { // map 3 writes nothing
		out := map[int]string{}
		if m == 3 {
			return out
		}
		for i := range 200 {
			k := fmt.Sprintf("w%d", (i*7+m)%150)
			out[output.PartitionOf(k, parts)] += fmt.Sprintf("%s\t%d\n", k, m)
		}
		return out
	}
	for _, pageSize := range []int{100, 2} {
		t.Run(fmt.Sprintf("pages of %d", pageSize), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			log := &testdouble.Journal{}
			b := rangedBlob(log)
			reg := NewRegistry()
			reg.Register("m", func(ctx context.Context, task *Task) error {
				for i := range 200 {
					if task.Ref.Partition == 3 {
						break
					}
					k := fmt.Sprintf("w%d", (i*7+task.Ref.Partition)%150)
					if err := task.Out.Emit(k, fmt.Sprint(task.Ref.Partition)); err != nil {
						return err
					}
				}
				return nil
			})
			var mu sync.Mutex
			read := map[int]string{}
			reg.Register("r", func(ctx context.Context, task *Task) error {
				in, err := io.ReadAll(task.Input)
				mu.Lock()
				defer mu.Unlock()
				read[task.Ref.Partition] = string(in)
				return err
			})
			cp := &recordsCP{fakeCP: &fakeCP{spec: mustSpec(t, shuffle64), lease: time.Minute}}
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			nop := func(context.Context, time.Duration) error { return nil }
			for m := range maps {
				if res := r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/0/%d", m)}, nop); res.Action != feed.Delete {
					t.Fatalf("map %d: %+v", m, res)
				}
			}
			if puts(log) != maps-1 {
				t.Errorf("%d PUTs by %d map tasks, one of which wrote nothing; want %d", puts(log), maps, maps-1)
			}
			// The manifest the control plane writes from the commits.
			w := blob.NewManifestWriter(b, blob.StageManifestKey("j1", "map"), domain.Manifest{Job: "j1", Stage: "map"}, pageSize)
			for m, res := range cp.results {
				wantOut := 1
				if m == 3 {
					wantOut = 0
				}
				if res.Outputs != wantOut || res.RecordsOut != int64(200*wantOut) {
					t.Errorf("map %d committed %d outputs, %d records; want %d, %d", m, res.Outputs, res.RecordsOut, wantOut, 200*wantOut)
				}
				for p := range res.Outputs {
					if err := w.Add(ctx, domain.Output{Stage: "map", Partition: m, Attempt: 1, Part: p, Key: blob.OutputKey("j1", "map", m, 1, p)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			from := len(log.All())
			for p := range parts {
				if res := r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/1/%d", p)}, nop); res.Action != feed.Delete {
					t.Fatalf("reduce %d: %+v", p, res)
				}
			}
			for p := range parts {
				var want strings.Builder
				for m := range maps {
					want.WriteString(emitted(m)[p])
				}
				if read[p] != want.String() {
					t.Errorf("reduce %d read %q, want %q", p, read[p], want.String())
				}
			}
			// The objects are small: every slice lies in the first GET's
			// read-ahead, one GET per (map that wrote, reducer).
			if got, want := len(ranges(log, from)), (maps-1)*parts; got != want {
				t.Errorf("%d ranged GETs, want %d", got, want)
			}
		})
	}
}

// Old manifests (one output per partition per map task, as every release
// before the indexed layout wrote) are read as before, also when a stage's
// map tasks were committed partly in each layout (a deploy mid-job).
func TestShuffleReadsPerPartLayout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const parts = 3
	log := &testdouble.Journal{}
	b := rangedBlob(log)
	w := blob.NewManifestWriter(b, blob.StageManifestKey("j1", "map"), domain.Manifest{Job: "j1", Stage: "map"}, 2)
	add := func(m, p int, body []byte) {
		k := blob.OutputKey("j1", "map", m, 1, p)
		if err := b.PutIfAbsent(ctx, k, body); err != nil {
			t.Fatal(err)
		}
		if err := w.Add(ctx, domain.Output{Stage: "map", Partition: m, Attempt: 1, Part: p, Key: k}); err != nil {
			t.Fatal(err)
		}
	}
	for p := range parts { // map 0: per part
		add(0, p, fmt.Appendf(nil, "old %d\n", p))
	}
	body, size := blob.ShuffleBody([][]byte{[]byte("new 0\n"), nil, []byte("new 2\n")})
	raw := make([]byte, size)
	body.ReadAt(raw, 0)
	add(1, 0, raw)         // map 1: indexed
	for p := range parts { // map 2: per part, empty parts included
		add(2, p, nil)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	read := map[int]string{}
	reg := NewRegistry()
	reg.Register("m", func(context.Context, *Task) error { return nil })
	reg.Register("r", func(ctx context.Context, task *Task) error {
		in, err := io.ReadAll(task.Input)
		read[task.Ref.Partition] = string(in)
		return err
	})
	cp := &fakeCP{spec: mustSpec(t, shuffleSpec), lease: time.Minute}
	r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	for p := range parts {
		r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/1/%d", p)}, func(context.Context, time.Duration) error { return nil })
	}
	want := map[int]string{0: "old 0\nnew 0\n", 1: "old 1\n", 2: "old 2\nnew 2\n"}
	if diff := gocmp.Diff(want, read); diff != "" {
		t.Errorf("reducers read (-want +got):\n%s", diff)
	}
}

// A shuffle feeding a lambda stage keeps the per-part layout (its function
// reads whole objects); so do lambda stages' own outputs and a shuffle of
// one partition.
func TestIndexedShuffleOnlyWhereRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spec string
		want bool
	}{
		{shuffle64, true},
		{shuffleSpec, true},
		{`{"name":"x","stages":[{"name":"map","task":"m","partitions":{"count":2},"shuffle":{"partitions":1}},` +
			`{"name":"reduce","task":"r","after":["map"]}]}`, false},
		{`{"name":"x","stages":[{"name":"map","task":"m","partitions":{"count":2},"shuffle":{"partitions":4}},` +
			`{"name":"reduce","lambda":"fn","after":["map"]}]}`, false},
		{`{"name":"x","stages":[{"name":"map","lambda":"fn","partitions":{"count":2},"shuffle":{"partitions":4}},` +
			`{"name":"reduce","task":"r","after":["map"]}]}`, false},
	} {
		if got := indexedShuffle(mustSpec(t, tc.spec), 0); got != tc.want {
			t.Errorf("%s: indexed %v, want %v", tc.spec, got, tc.want)
		}
	}
}

// A runner keeps the indexes its reducers read: the next reducer of the
// same map outputs on this host does one GET per non-empty slice and none
// for an empty one. Without the cache (a fresh runner) each slice costs
// its one GET, empty or not.
func TestIndexCacheSkipsEmptySlices(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const maps, parts = 3, 64
	log := &testdouble.Journal{}
	b := rangedBlob(log)
	w := blob.NewManifestWriter(b, blob.StageManifestKey("j1", "map"), domain.Manifest{Job: "j1", Stage: "map"}, 0)
	nonEmpty := 0
	for m := range maps {
		bufs := make([][]byte, parts)
		for r := range parts {
			if r%(m+2) == 0 { // map 0 writes the even partitions, map 1 every third, ...
				bufs[r] = fmt.Appendf(nil, "k%d\t%d\n", r, m)
				if r > 0 {
					nonEmpty++
				}
			}
		}
		body, size := blob.ShuffleBody(bufs)
		raw := make([]byte, size)
		body.ReadAt(raw, 0)
		k := blob.OutputKey("j1", "map", m, 1, 0)
		b.PutIfAbsent(ctx, k, raw)
		w.Add(ctx, domain.Output{Stage: "map", Partition: m, Attempt: 1, Key: k})
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	read := map[int]string{}
	reg := NewRegistry()
	reg.Register("r", func(ctx context.Context, task *Task) error {
		in, err := io.ReadAll(task.Input)
		read[task.Ref.Partition] = string(in)
		return err
	})
	cp := &fakeCP{spec: mustSpec(t, shuffle64), lease: time.Minute}
	r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	nop := func(context.Context, time.Duration) error { return nil }
	for p := range parts {
		r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/1/%d", p)}, nop)
	}
	// Reducer 0 reads every index (one GET a map); the others only their
	// non-empty slices.
	if got, want := len(ranges(log, 0)), maps+nonEmpty; got != want {
		t.Errorf("%d ranged GETs, want %d: %d indexes and %d non-empty slices", got, want, maps, nonEmpty)
	}
	for p := range parts {
		var want strings.Builder
		for m := range maps {
			if p%(m+2) == 0 {
				fmt.Fprintf(&want, "k%d\t%d\n", p, m)
			}
		}
		if read[p] != want.String() {
			t.Errorf("reduce %d read %q, want %q", p, read[p], want.String())
		}
	}
	// A fresh runner has no indexes: one GET per map object and reducer.
	from := len(log.All())
	fresh := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	fresh.Handle(ctx, feed.Delivery{Body: "j1/1/1"}, nop)
	if len(ranges(log, from)) != maps {
		t.Errorf("a fresh runner made %d ranged GETs for one reducer, want %d", len(ranges(log, from)), maps)
	}
}

// The cache holds at most its bound, starting over when full, and never
// holds an index larger than the bound.
func TestIndexCacheBound(t *testing.T) {
	t.Parallel()
	c := &indexCache{limit: 100}
	offs := make([]int64, 5) // 40 bytes and a 1-byte key
	c.put("a", offs)
	c.put("b", offs)
	if _, ok := c.get("a"); !ok || c.bytes != 82 {
		t.Fatalf("holds %d bytes, a cached %v; want both", c.bytes, ok)
	}
	c.put("c", offs) // 123 > 100: starts over
	if _, ok := c.get("a"); ok || c.bytes != 41 {
		t.Errorf("after passing the bound: %d bytes, a still cached %v", c.bytes, ok)
	}
	c.put("huge", make([]int64, 20))
	if _, ok := c.get("huge"); ok {
		t.Error("an index over the bound was cached")
	}
	var none *indexCache
	none.put("x", offs)
	if _, ok := none.get("x"); ok {
		t.Error("a nil cache holds something")
	}
}
