package executor

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

const rangeSpec = `{"name":"sort","stages":[` +
	`{"name":"map","task":"m","partitions":{"count":4},"shuffle":{"partitions":6,"by":"range"}},` +
	`{"name":"reduce","task":"r","after":["map"]}]}`

// End to end through the runner: each map task of a range shuffle writes
// one sorted run (one PUT, one output committed, its records counted);
// each reducer reads its key range of every run in key order, the
// partitions in order are all the records sorted, and a reducer on
// another host (no cached headers) or a second attempt reads the same
// bytes: the boundaries are the manifest's.
func TestRangeShuffleEndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const maps, parts = 4, 6
	record := func(m, i int) string { return fmt.Sprintf("k%04d\tmap %d record %d", (i*7919+m*31)%1000, m, i) }
	var all []string
	for m := range maps {
		for i := range 500 {
			all = append(all, record(m, i))
		}
	}
	log := &testdouble.Journal{}
	b := rangedBlob(log)
	reg := NewRegistry()
	reg.Register("m", func(ctx context.Context, task *Task) error {
		for i := range 500 {
			k, v, _ := strings.Cut(record(task.Ref.Partition, i), "\t")
			if i%2 == 0 {
				if err := task.Out.Emit(k, v); err != nil {
					return err
				}
			} else if _, err := fmt.Fprintf(task.Out, "%s\t%s\n", k, v); err != nil {
				return err
			}
		}
		return nil
	})
	var mu sync.Mutex
	read := map[string]string{}
	reg.Register("r", func(ctx context.Context, task *Task) error {
		in, err := io.ReadAll(task.Input)
		mu.Lock()
		defer mu.Unlock()
		read[fmt.Sprintf("%d/%d", task.Ref.Partition, len(read))] = string(in)
		return err
	})
	cp := &recordsCP{fakeCP: &fakeCP{spec: mustSpec(t, rangeSpec), lease: time.Minute}}
	nop := func(context.Context, time.Duration) error { return nil }
	r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	for m := range maps {
		if res := r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("sort/0/%d", m)}, nop); res.Action != feed.Delete {
			t.Fatalf("map %d: %+v", m, res)
		}
	}
	if puts(log) != maps {
		t.Errorf("%d PUTs by %d map tasks, want one each", puts(log), maps)
	}
	w := blob.NewManifestWriter(b, blob.StageManifestKey("sort", "map"), domain.Manifest{Job: "sort", Stage: "map"}, 0)
	w.IndexedShuffle() // as the control plane writes a range shuffle's
	for m := range maps {
		res := cp.results[m]
		if res.Outputs != 1 || res.RecordsOut != 500 {
			t.Errorf("map %d committed %d outputs, %d records; want 1, 500", m, res.Outputs, res.RecordsOut)
		}
		if err := w.Add(ctx, domain.Output{Stage: "map", Partition: m, Attempt: 1, Key: blob.OutputKey("sort", "map", m, 1, 0)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// Every reducer twice: on this host, then on a fresh one.
	fresh := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
	got := make([]string, parts)
	for _, host := range []*Runner{r, fresh} {
		for p := range parts {
			before := len(read)
			if res := host.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("sort/1/%d", p)}, nop); res.Action != feed.Delete {
				t.Fatalf("reduce %d: %+v", p, res)
			}
			in := read[fmt.Sprintf("%d/%d", p, before)]
			if host == r {
				got[p] = in
			} else if in != got[p] {
				t.Errorf("reduce %d read other records on another host:\n%q\n%q", p, in, got[p])
			}
		}
	}
	slices.SortStableFunc(all, func(a, b string) int { return strings.Compare(a[:5], b[:5]) })
	if want := strings.Join(all, "\n") + "\n"; strings.Join(got, "") != want {
		t.Errorf("the partitions in order are not the records sorted by key")
	}
	for p := range parts {
		if n := strings.Count(got[p], "\n"); n < 2000/parts/2 {
			t.Errorf("partition %d holds %d records of 2,000", p, n)
		}
	}
}
