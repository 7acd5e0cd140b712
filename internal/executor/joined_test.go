package executor

import (
	"context"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// writeShuffle writes stage's manifest: maps tasks, each with one
// key<TAB>value line in each of parts per-part outputs (indexed when
// indexed is set: one object of all parts).
func writeShuffle(t *testing.T, b *testdouble.Blob, stage string, maps, parts int, indexed bool) {
	t.Helper()
	ctx := context.Background()
	w := blob.NewManifestWriter(b, blob.StageManifestKey("j1", stage), domain.Manifest{Job: "j1", Stage: stage, Bucket: "bucket"}, 100)
	for p := range maps {
		if indexed {
			o := output.New(parts, 1<<20)
			o.Index()
			o.Bind(ctx, b, func(r int) string { return blob.OutputKey("j1", stage, p, 1, r) })
			for r := range parts {
				fmt.Fprintf(o.Part(r), "k%d\t%s %d\n", r, stage, p)
			}
			if err := o.Publish(ctx, b); err != nil {
				t.Fatal(err)
			}
			if err := w.Add(ctx, domain.Output{Stage: stage, Partition: p, Attempt: 1, Part: 0, Key: blob.OutputKey("j1", stage, p, 1, 0)}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for r := range parts {
			k := blob.OutputKey("j1", stage, p, 1, r)
			if err := b.PutIfAbsent(ctx, k, fmt.Appendf(nil, "k%d\t%s %d\n", r, stage, p)); err != nil {
				t.Fatal(err)
			}
			if err := w.Add(ctx, domain.Output{Stage: stage, Partition: p, Attempt: 1, Part: r, Key: k}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// A stage after two shuffles reads partition p of each, every record
// tagged with its stage's name, the sources in "after" order, whichever
// layout each map output has.
func TestJoinedShuffleInputIsTagged(t *testing.T) {
	t.Parallel()
	const spec = `{"name":"join","stages":[` +
		`{"name":"orders","task":"m","partitions":{"count":2},"shuffle":{"partitions":2}},` +
		`{"name":"customers","task":"m","partitions":{"count":1},"shuffle":{"partitions":2}},` +
		`{"name":"join","task":"r","after":["customers","orders"]}]}`
	for _, indexed := range []bool{false, true} {
		t.Run(fmt.Sprintf("indexed %t", indexed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newBlob()
			writeShuffle(t, b, "orders", 2, 2, indexed)
			writeShuffle(t, b, "customers", 1, 2, indexed)
			var mu sync.Mutex
			read := map[int]string{}
			reg := NewRegistry()
			reg.Register("r", func(ctx context.Context, task *Task) error {
				in, err := io.ReadAll(task.Input)
				mu.Lock()
				defer mu.Unlock()
				read[task.Ref.Partition] = string(in)
				return err
			})
			cp := &fakeCP{spec: mustSpec(t, spec), lease: time.Minute}
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			for part := range 2 {
				r.Handle(ctx, feed.Delivery{Body: fmt.Sprintf("j1/2/%d", part), SentAt: time.Now()}, func(context.Context, time.Duration) error { return nil })
			}
			if _, commits, fails := cp.snapshot(); len(commits) != 2 {
				t.Fatalf("%d commits, %d failures; want 2 commits", len(commits), len(fails))
			}
			for part := range 2 {
				want := fmt.Sprintf("customers\tk%d\tcustomers 0\norders\tk%d\torders 0\norders\tk%d\torders 1\n", part, part, part)
				if read[part] != want {
					t.Errorf("join %d read %q, want %q", part, read[part], want)
				}
			}
		})
	}
}

// A task of a stage with several inputs reads its split with its own
// input's bucket and format, and is told which input it is.
func TestSeveralInputsTellTheirSource(t *testing.T) {
	t.Parallel()
	const spec = `{"name":"j","stages":[{"name":"s","task":"r","partitions":{"inputs":[` +
		`{"name":"orders","prefix":"s3://orders-bucket/o/","format":"csv"},` +
		`{"prefix":"s3://customers-bucket/c/","format":"jsonl"}]}}]}`
	tests := []struct {
		name                       string
		in                         split.Split
		wantSource, wantFormat, rd string
		wantHeader                 []string
	}{
		{"orders, named", split.Split{Key: "o/a.csv", End: 100}, "orders", "csv", "o1,c1\n", []string{"order", "customer"}},
		{"customers, by index", split.Split{Key: "c/a.jsonl", End: 100, Source: 1}, "1", "jsonl", `{"id":"c1"}` + "\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := newBlob()
			b.Put("orders-bucket", "o/a.csv", []byte("order,customer\no1,c1\n"))
			b.Put("customers-bucket", "c/a.jsonl", []byte(`{"id":"c1"}`+"\n"))
			var got struct {
				source, format, input string
				header                []string
			}
			reg := NewRegistry()
			reg.Register("r", func(ctx context.Context, task *Task) error {
				in, err := io.ReadAll(task.Input)
				got.source, got.format, got.input, got.header = task.Source, task.Format, string(in), task.Header
				return err
			})
			f := &fakeCP{spec: mustSpec(t, spec), lease: time.Minute}
			r := &Runner{CP: lambdaInputCP{f, tt.in}, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			r.Handle(ctx, feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, func(context.Context, time.Duration) error { return nil })
			if _, commits, fails := f.snapshot(); len(commits) != 1 {
				t.Fatalf("%d commits, failures %v", len(commits), fails)
			}
			if got.source != tt.wantSource || got.format != tt.wantFormat || got.input != tt.rd || fmt.Sprint(got.header) != fmt.Sprint(tt.wantHeader) {
				t.Errorf("task saw source %q format %q header %q input %q; want %q %q %q %q",
					got.source, got.format, got.header, got.input, tt.wantSource, tt.wantFormat, tt.wantHeader, tt.rd)
			}
		})
	}
}
