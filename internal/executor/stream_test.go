package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
)

// requests are the blob requests journaled in log, each put with the
// size of the object it wrote (objects never change once written).
func requests(b *testdouble.Blob, log *testdouble.Journal) []string {
	var out []string
	for _, e := range log.All() {
		if key, ok := strings.CutPrefix(e, "put "); ok {
			body, _ := b.Object(key)
			e = fmt.Sprintf("put %s %d", key, len(body))
		}
		out = append(out, e)
	}
	return out
}

// recordsCP is fakeCP taking record counts at commit, as control.Service does.
type recordsCP struct {
	*fakeCP
	mu      sync.Mutex
	results []control.CommitResult
}

func (c *recordsCP) Commit(ctx context.Context, cl control.Claim, res control.CommitResult) error {
	c.mu.Lock()
	c.results = append(c.results, res)
	c.mu.Unlock()
	return c.fakeCP.Commit(ctx, cl, res)
}

const mib = 1 << 20

// lines is n bytes of 100-byte lines.
func lines(n int) []byte {
	line := strings.Repeat("x", 99) + "\n"
	return []byte(strings.Repeat(line, n/100))
}

// An output partition streams to S3 once it holds a part (8 MiB): the
// attempt holds about one part in memory however much it writes, and its
// object is complete (multipart upload completed with If-None-Match)
// before it commits. A small output is one PutObject. Failures abort the
// open uploads and never commit; records are counted as written.
func TestStreamedOutputs(t *testing.T) {
	t.Parallel()
	key := func(p int) string { return blob.OutputKey("j1", "s", 0, 1, p) }
	k0, k1 := key(0), key(1)
	cases := []struct {
		name  string
		spec  string
		limit int64 // the cap; 0: the default
		write func(o *output.Output) error
		// failPart fails the n-th UploadPart (from 1).
		failPart int
		// existing objects before the attempt publishes.
		existing map[string][]byte
		// ignore: the task returns nil whatever its writes returned.
		ignore bool

		wantCalls   []string
		wantObjects map[string]int // key -> size; nil: the attempt fails
		wantRecords int64
		wantPeak    int64 // at most
		wantErr     string
	}{
		{
			name: "a small output is one put", spec: oneTask,
			write:     func(o *output.Output) error { _, err := o.Write(lines(1000)); return err },
			wantCalls: []string{"put " + k0 + " 1000"}, wantObjects: map[string]int{k0: 1000}, wantRecords: 10, wantPeak: 1000,
		},
		{
			name: "20 MiB in small writes streams three parts", spec: oneTask,
			write: func(o *output.Output) error {
				chunk := lines(64 << 10)
				for range 20 * mib / len(chunk) {
					if _, err := o.Write(chunk); err != nil {
						return err
					}
				}
				return nil
			},
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 8388608", "part " + k0 + " 2 8388608",
				"part " + k0 + " 3 4182784", "complete " + k0 + " 3"},
			wantObjects: map[string]int{k0: 20 * mib / 65500 * 65500}, wantRecords: 20 * mib / 65500 * 655, wantPeak: output.DefaultPartSize,
		},
		{
			name: "one 20 MiB write is taken a part at a time", spec: oneTask,
			write: func(o *output.Output) error { _, err := o.Write(bytes.Repeat([]byte("y"), 20*mib)); return err },
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 8388608", "part " + k0 + " 2 8388608",
				"part " + k0 + " 3 4194304", "complete " + k0 + " 3"},
			wantObjects: map[string]int{k0: 20 * mib}, wantRecords: 1, wantPeak: output.DefaultPartSize,
		},
		{
			name: "a part exactly full leaves no empty last part", spec: oneTask,
			write:       func(o *output.Output) error { _, err := o.Write(bytes.Repeat([]byte("z\n"), 8*mib)); return err },
			wantCalls:   []string{"create " + k0, "part " + k0 + " 1 8388608", "part " + k0 + " 2 8388608", "complete " + k0 + " 2"},
			wantObjects: map[string]int{k0: 16 * mib}, wantRecords: 8 * mib, wantPeak: output.DefaultPartSize,
		},
		{
			// A shuffle's partitions under the cap are one indexed object
			// (shuffle.go), put once after the function returns, whatever
			// their sizes: nothing streams.
			name: "emitted records under the cap: one indexed object", spec: shuffleTwo,
			write: func(o *output.Output) error {
				v := strings.Repeat("v", 1000)
				for range 9 * mib / 1000 { // 1,003-byte records
					if err := o.Emit("a", v); err != nil { // "a" hashes to partition 0 of 2
						return err
					}
				}
				return o.Emit("b", "1") // to partition 1
			},
			wantCalls:   []string{"put " + k0 + " 9465355"}, // the header: 16 + 3 offsets of 8 bytes
			wantObjects: map[string]int{k0: 9*mib/1000*1003 + 4 + 40}, wantRecords: 9*mib/1000 + 1, wantPeak: 9*mib/1000*1003 + 4,
		},
		{
			// Past the cap, the attempt falls back to the per-part
			// layout and streams. A record is buffered whole: the part
			// that passes 8 MiB ends with the record that took it there.
			name: "emitted records past the cap stream", spec: shuffleTwo, limit: 9 * mib,
			write: func(o *output.Output) error {
				v := strings.Repeat("v", 1000)
				for range 10 * mib / 1000 { // 1,003-byte records
					if err := o.Emit("a", v); err != nil { // "a" hashes to partition 0 of 2
						return err
					}
				}
				return o.Emit("b", "1") // to partition 1
			},
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 9436224", "part " + k0 + " 2 1080231",
				"complete " + k0 + " 2", "put " + k1 + " 4"},
			wantObjects: map[string]int{k0: 10 * mib / 1000 * 1003, k1: 4}, wantRecords: 10*mib/1000 + 1, wantPeak: 9 * mib,
		},
		{
			name: "the cap streams the fullest buffer S3 takes as a part", spec: shuffleTwo, limit: 12 * mib,
			write: func(o *output.Output) error {
				if _, err := o.Part(0).Write(lines(4 * mib)); err != nil {
					return err
				}
				if _, err := o.Part(1).Write(lines(6 * mib)); err != nil {
					return err
				}
				_, err := o.Part(0).Write(lines(3 * mib)) // 13 MiB buffered: partition 1 streams
				return err
			},
			wantCalls:   []string{"create " + k1, "part " + k1 + " 1 6291400", "put " + k0 + " 7340000", "complete " + k1 + " 1"},
			wantObjects: map[string]int{k0: 7340000, k1: 6291400}, wantRecords: 41943 + 62914 + 31457, wantPeak: 12 * mib,
		},
		{
			name: "buffers under a part's minimum cannot stream: the cap refuses", spec: shuffleTwo, limit: 8 * mib,
			write: func(o *output.Output) error {
				if _, err := o.Part(0).Write(lines(4 * mib)); err != nil {
					return err
				}
				_, err := o.Part(1).Write(lines(5 * mib))
				return err
			},
			ignore:  true,
			wantErr: "task output too large: an attempt may buffer at most 8388608 bytes of outputs in memory before publishing them",
		},
		{
			name: "a failed task aborts its upload", spec: oneTask,
			write: func(o *output.Output) error {
				if _, err := o.Write(lines(10 * mib)); err != nil {
					return err
				}
				return errBoom
			},
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 8388608", "abort " + k0},
			wantErr:   "boom",
		},
		{
			name: "a failed part fails the attempt even if the function ignores it", spec: oneTask, failPart: 2, ignore: true,
			write:     func(o *output.Output) error { _, err := o.Write(lines(20 * mib)); return err },
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 8388608", "abort " + k0},
			wantErr:   "stream output partition 0: part two lost",
		},
		{
			name: "an existing object is this attempt's earlier write: the upload is aborted", spec: oneTask,
			existing: map[string][]byte{k0: []byte("earlier")},
			write:    func(o *output.Output) error { _, err := o.Write(lines(9 * mib)); return err },
			wantCalls: []string{"create " + k0, "part " + k0 + " 1 8388608", "part " + k0 + " 2 1048492",
				"complete " + k0 + " 2", "abort " + k0},
			wantObjects: map[string]int{k0: len("earlier")}, wantRecords: 9 * mib / 100, wantPeak: output.DefaultPartSize,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := &recordsCP{fakeCP: &fakeCP{spec: mustSpec(t, tc.spec), lease: time.Minute}}
			log := &testdouble.Journal{}
			b := streamBlob(log, 0)
			var parts atomic.Int32
			b.SetFault(func(method string) error {
				if method == "UploadPart" && int(parts.Add(1)) == tc.failPart {
					return errors.New("part two lost")
				}
				return nil
			})
			for k, v := range tc.existing {
				b.Put(b.Bucket(), k, v)
			}
			var peak int64
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error {
				err := tc.write(t.Out)
				peak = t.Out.BufferedPeak()
				if tc.ignore {
					return nil
				}
				return err
			})
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour, MaxOutputBytes: tc.limit}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now()}, nil)
			calls, open := requests(b, log), b.OpenUploads()
			if tc.wantCalls != nil {
				if diff := gocmp.Diff(tc.wantCalls, calls); diff != "" {
					t.Errorf("requests (-want +got):\n%s", diff)
				}
			}
			if open != 0 {
				t.Errorf("%d uploads left open, want every one completed or aborted", open)
			}
			_, commits, _ := cp.snapshot()
			if tc.wantErr != "" {
				if res.Err == nil || !strings.Contains(res.Err.Error(), tc.wantErr) {
					t.Fatalf("result %+v, want a failure containing %q", res, tc.wantErr)
				}
				if len(commits) != 0 {
					t.Fatalf("commits %v, want none", commits)
				}
				for _, k := range b.Keys("") {
					if _, pre := tc.existing[k]; !pre {
						t.Errorf("object %s published by a failed attempt", k)
					}
				}
				return
			}
			if res.Action != feed.Delete || res.Err != nil || len(commits) != 1 {
				t.Fatalf("result %+v, commits %v; want the attempt committed", res, commits)
			}
			if tc.wantObjects != nil {
				got := map[string]int{}
				for _, k := range b.Keys("") {
					v, _ := b.Object(k)
					got[k] = len(v)
				}
				if diff := gocmp.Diff(tc.wantObjects, got); diff != "" {
					t.Errorf("objects (-want +got):\n%s", diff)
				}
				if cp.results[0].RecordsOut != tc.wantRecords {
					t.Errorf("records out %d, want %d", cp.results[0].RecordsOut, tc.wantRecords)
				}
				if peak > tc.wantPeak {
					t.Errorf("peak buffered %d bytes, want at most %d", peak, tc.wantPeak)
				}
			}
		})
	}
}

const shuffleTwo = `{"name":"out","stages":[` +
	`{"name":"s","task":"work","partitions":{"count":1},"shuffle":{"partitions":2}},` +
	`{"name":"r","task":"sink","after":["s"]}]}`
