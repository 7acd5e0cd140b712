package executor

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
)

const shuffleSpec = `{"name":"shuf","stages":[` +
	`{"name":"map","task":"m","partitions":{"count":5},"shuffle":{"partitions":3}},` +
	`{"name":"reduce","task":"r","after":["map"]}]}`

// A reduce task reads its part of every map output through the stage's
// manifest, whether the manifest holds its outputs or is paged, and fails
// rather than read part of them.
func TestShuffleInputFollowsManifestPages(t *testing.T) {
	t.Parallel()
	const maps, parts = 5, 3
	key := blob.StageManifestKey("j1", "map")
	tests := []struct {
		name      string
		pageSize  int
		wantPages int
		breakIt   func(b *testdouble.Blob)
		wantFail  bool
	}{
		{name: "one object", pageSize: 100},
		{name: "pages of four", pageSize: 4, wantPages: 4},
		{name: "pages of one", pageSize: 1, wantPages: maps * parts},
		{name: "a page missing", pageSize: 4, wantPages: 4, wantFail: true,
			breakIt: func(b *testdouble.Blob) { b.Delete(blob.ManifestPageKey(key, 3)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newBlob()
			w := blob.NewManifestWriter(b, key, domain.Manifest{Job: "j1", Stage: "map", Bucket: "bucket"}, tt.pageSize)
			for p := range maps {
				for r := range parts {
					k := blob.OutputKey("j1", "map", p, 1, r)
					if err := b.PutIfAbsent(ctx, k, fmt.Appendf(nil, "map %d part %d\n", p, r)); err != nil {
						t.Fatal(err)
					}
					if err := w.Add(ctx, domain.Output{Stage: "map", Partition: p, Attempt: 1, Part: r, Key: k}); err != nil {
						t.Fatal(err)
					}
				}
			}
			if err := w.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if w.Pages() != tt.wantPages {
				t.Fatalf("%d pages, want %d", w.Pages(), tt.wantPages)
			}
			if tt.breakIt != nil {
				tt.breakIt(b)
			}
			var mu sync.Mutex
			read := map[int]string{}
			reg := NewRegistry()
			reg.Register("r", func(ctx context.Context, task *Task) error {
				in, err := io.ReadAll(task.Input)
				if err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				read[task.Ref.Partition] = string(in)
				return nil
			})
			cp := &fakeCP{spec: mustSpec(t, shuffleSpec), lease: time.Minute}
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			// One runner for every part: the second and third reuse the
			// manifest it read for the first.
			for part := range parts {
				r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/1/%d", part), SentAt: time.Now()}, func(context.Context, time.Duration) error { return nil })
			}
			_, commits, fails := cp.snapshot()
			if tt.wantFail {
				if len(commits) != 0 || len(fails) != parts {
					t.Fatalf("%d commits, %d failures; want every reduce task to fail", len(commits), len(fails))
				}
				return
			}
			if len(commits) != parts {
				t.Fatalf("%d commits, %d failures; want %d commits", len(commits), len(fails), parts)
			}
			for part := range parts {
				var want strings.Builder
				for p := range maps {
					fmt.Fprintf(&want, "map %d part %d\n", p, part)
				}
				if read[part] != want.String() {
					t.Errorf("reduce %d read %q, want %q", part, read[part], want.String())
				}
			}
		})
	}
}
