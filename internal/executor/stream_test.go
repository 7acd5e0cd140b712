package executor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
)

// mpBlob is memBlob with multipart uploads, held to S3's rules: every part
// but the last holds at least blob.MinPartSize bytes, a completion with
// If-None-Match fails on an existing key, and an object appears only when
// its upload completes. It records every request.
type mpBlob struct {
	memBlob
	mu      sync.Mutex
	next    int
	uploads map[string]map[int32][]byte // upload id -> part number -> body
	keys    map[string]string           // upload id -> key
	calls   []string                    // "create k", "part k n size", "complete k n", "abort k", "put k"
	// partErr fails UploadPart number n (from 1, over all uploads).
	partErr   error
	failPartN int
	parts     int
	// minPart is S3's minimum size of a part but the last (0: blob.MinPartSize).
	minPart int
}

func (b *mpBlob) log(format string, a ...any) {
	b.calls = append(b.calls, fmt.Sprintf(format, a...))
}

func (b *mpBlob) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	b.mu.Lock()
	b.log("put %s %d", key, len(body))
	b.mu.Unlock()
	return b.memBlob.PutIfAbsent(ctx, key, body)
}

var _ Blob = (*mpBlob)(nil)

func (b *mpBlob) CanMultipart() error { return nil }

func (b *mpBlob) CreateMultipart(ctx context.Context, key string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	b.next++
	id := fmt.Sprintf("u%d", b.next)
	if b.uploads == nil {
		b.uploads, b.keys = map[string]map[int32][]byte{}, map[string]string{}
	}
	b.uploads[id], b.keys[id] = map[int32][]byte{}, key
	b.log("create %s", key)
	return id, nil
}

func (b *mpBlob) UploadPart(ctx context.Context, key, id string, n int32, body []byte) (blob.CompletedPart, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return blob.CompletedPart{}, err
	}
	b.parts++
	if b.parts == b.failPartN {
		return blob.CompletedPart{}, b.partErr
	}
	if b.keys[id] != key {
		return blob.CompletedPart{}, fmt.Errorf("no upload %s at %s", id, key)
	}
	b.uploads[id][n] = bytes.Clone(body)
	b.log("part %s %d %d", key, n, len(body))
	return blob.CompletedPart{Number: n, ETag: fmt.Sprintf("e%d", n)}, nil
}

func (b *mpBlob) CompleteMultipartIfAbsent(ctx context.Context, key, id string, parts []blob.CompletedPart) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log("complete %s %d", key, len(parts))
	up, ok := b.uploads[id]
	if !ok || b.keys[id] != key {
		return fmt.Errorf("NoSuchUpload %s", id)
	}
	var body []byte
	for i, p := range parts {
		part, ok := up[p.Number]
		if !ok || p.Number != int32(i+1) {
			return fmt.Errorf("InvalidPart %d", p.Number)
		}
		if i < len(parts)-1 && len(part) < cmp.Or(b.minPart, blob.MinPartSize) {
			return fmt.Errorf("EntityTooSmall: part %d holds %d bytes", p.Number, len(part))
		}
		body = append(body, part...)
	}
	b.memBlob.mu.Lock()
	defer b.memBlob.mu.Unlock()
	if b.objs == nil {
		b.objs = map[string][]byte{}
	}
	if _, exists := b.objs[key]; exists {
		return batch.ErrExists // the upload stays open, as on S3
	}
	b.objs[key] = body
	delete(b.uploads, id)
	return nil
}

func (b *mpBlob) AbortMultipart(ctx context.Context, key, id string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	b.log("abort %s", key)
	delete(b.uploads, id)
	return nil
}

// state is the requests made (with the part sizes) and the uploads left
// open.
func (b *mpBlob) state() (calls []string, open int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...), len(b.uploads)
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
			b := &mpBlob{failPartN: tc.failPart, partErr: errors.New("part two lost")}
			for k, v := range tc.existing {
				if err := b.memBlob.PutIfAbsent(context.Background(), k, v); err != nil {
					t.Fatal(err)
				}
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
			calls, open := b.state()
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
				for k := range b.objs {
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
				for k, v := range b.objs {
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

// A streamed object holds exactly the bytes written, in order.
func TestStreamedOutputContent(t *testing.T) {
	t.Parallel()
	b := &mpBlob{minPart: 1}
	o := output.New(1, 0)
	o.SetPartSizes(10, 1)
	o.Bind(context.Background(), b, func(int) string { return "k" })
	var want []byte
	for i := range 50 {
		w := []byte(fmt.Sprintf("line %d\n", i))
		want = append(want, w...)
		if _, err := o.Write(w); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Publish(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if got := b.objs["k"]; !bytes.Equal(got, want) {
		t.Fatalf("object %q, want %q", got, want)
	}
	if o.UploadedParts() < 30 || o.Records() != 50 {
		t.Fatalf("%d parts, %d records; want the 10-byte parts and 50 records", o.UploadedParts(), o.Records())
	}
}
