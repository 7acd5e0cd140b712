package executor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdatask"
)

// ckptCP is fakeCP with checkpoints: every checkpoint is accepted.
type ckptCP struct {
	*fakeCP
	mu    sync.Mutex
	saved []int64 // offsets
}

func (c *ckptCP) Checkpoint(ctx context.Context, cl control.Claim, seq int, offset int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.saved = append(c.saved, offset)
	return nil
}

func (c *ckptCP) Continue(ctx context.Context, cl control.Claim, offset int64) (control.Decision, error) {
	return control.Decision{}, control.ErrNoCheckpoints
}

func (c *ckptCP) NoteResumed(ctx context.Context, cl control.Claim) {}

func (c *ckptCP) CanCheckpoint() error { return nil }

// TestLambdaCheckpoint: a function that checkpoints is invoked again from
// each checkpoint, with fresh checkpoint outputs, and the attempt commits
// the concatenation of what each invocation wrote; a checkpoint that
// breaks the protocol fails the attempt with an error naming the problem.
func TestLambdaCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	big := base64.StdEncoding.EncodeToString(make([]byte, 64<<10+1))
	tests := []struct {
		name string
		// fn answers invocation i (from 0) of event ev, writing through b.
		fn       func(b *testdouble.Blob, i int, ev lambdatask.Event) string
		want     string // the committed output
		failWith string
	}{
		{name: "continues from each checkpoint", fn: func(b *testdouble.Blob, i int, ev lambdatask.Event) string {
			if i < 2 {
				b.PutIfAbsent(ctx, ev.CheckpointOutputs[0], []byte(fmt.Sprintf("part %d\n", i)))
				return fmt.Sprintf(`{"outputs":[{"part":0,"key":%q}],"checkpoint":{"offset":%d,"state":"%s"}}`,
					ev.CheckpointOutputs[0], 10*(i+1), base64.StdEncoding.EncodeToString([]byte(fmt.Sprint(i))))
			}
			b.PutIfAbsent(ctx, ev.Outputs[0], []byte("last\n"))
			return fmt.Sprintf(`{"outputs":[{"part":0,"key":%q}]}`, ev.Outputs[0])
		}, want: "part 0\npart 1\nlast\n"},
		{name: "a checkpoint without outputs", fn: func(b *testdouble.Blob, i int, ev lambdatask.Event) string {
			if i == 0 {
				return `{"outputs":[],"checkpoint":{"offset":5}}`
			}
			b.PutIfAbsent(ctx, ev.Outputs[0], []byte("all\n"))
			return fmt.Sprintf(`{"outputs":[{"part":0,"key":%q}]}`, ev.Outputs[0])
		}, want: "all\n"},
		{name: "checkpointed outputs at the attempt's output keys", fn: func(b *testdouble.Blob, i int, ev lambdatask.Event) string {
			b.PutIfAbsent(ctx, ev.Outputs[0], []byte("x\n"))
			return fmt.Sprintf(`{"outputs":[{"part":0,"key":%q}],"checkpoint":{"offset":1}}`, ev.Outputs[0])
		}, failWith: "the outputs of an invocation that checkpoints go to the event's checkpointOutputs"},
		{name: "negative offset", fn: func(*testdouble.Blob, int, lambdatask.Event) string {
			return `{"outputs":[],"checkpoint":{"offset":-1}}`
		}, failWith: "response checkpoint: checkpoint refused: offset -1 is negative"},
		{name: "offset going back", fn: func(_ *testdouble.Blob, i int, _ lambdatask.Event) string {
			return fmt.Sprintf(`{"outputs":[],"checkpoint":{"offset":%d}}`, 10-5*i)
		}, failWith: "offset 5 is behind the last checkpoint's 10"},
		{name: "no progress", fn: func(*testdouble.Blob, int, lambdatask.Event) string {
			return `{"outputs":[],"checkpoint":{"offset":7,"state":"YQ=="}}`
		}, failWith: "offset 7 and state are the last checkpoint's; a checkpoint must make progress"},
		{name: "state too big", fn: func(*testdouble.Blob, int, lambdatask.Event) string {
			return `{"outputs":[],"checkpoint":{"offset":1,"state":"` + big + `"}}`
		}, failWith: "state of 65537 bytes is over the 65536-byte limit"},
		{name: "state not base64", fn: func(*testdouble.Blob, int, lambdatask.Event) string {
			return `{"outputs":[],"checkpoint":{"offset":1,"state":"not base64!"}}`
		}, failWith: "illegal base64 data"},
		{name: "a reject at a negative offset", fn: func(*testdouble.Blob, int, lambdatask.Event) string {
			return `{"outputs":[],"rejects":[{"record":"r","reason":"x","offset":-2}]}`
		}, failWith: "response rejects[0]: offset -2 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeCP{spec: mustSpec(t, lambdaOne), lease: time.Minute}
			cp := &ckptCP{fakeCP: f}
			b := newBlob()
			var mu sync.Mutex
			calls := 0
			inv := &fakeInvoker{fn: func(ctx context.Context, ev lambdatask.Event) ([]byte, string, error) {
				mu.Lock()
				i := calls
				calls++
				mu.Unlock()
				if i > 5 {
					return nil, "", fmt.Errorf("invoked %d times", i+1)
				}
				return []byte(tt.fn(b, i, ev)), "", nil
			}}
			r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, Lambda: inv}
			r.Handle(ctx, feed.Delivery{Body: "j1/0/0"}, nil)
			_, commits, _ := f.snapshot()
			if tt.failWith != "" {
				if len(commits) != 0 || len(f.causes) != 1 || !strings.Contains(f.causes[0], tt.failWith) {
					t.Fatalf("commits %v, failures %q; want one failure containing %q", commits, f.causes, tt.failWith)
				}
				return
			}
			if len(commits) != 1 {
				t.Fatalf("commits %v, failures %q; want a commit", commits, f.causes)
			}
			// The first event's outputs are the attempt's output keys.
			got, err := b.Get(ctx, inv.events[0].Outputs[0])
			if err != nil || string(got) != tt.want {
				t.Fatalf("committed output %q (%v), want %q", got, err, tt.want)
			}
			seen := map[string]bool{}
			for i, ev := range inv.events {
				if seen[ev.CheckpointOutputs[0]] {
					t.Errorf("invocation %d reuses checkpoint output %s", i, ev.CheckpointOutputs[0])
				}
				seen[ev.CheckpointOutputs[0]] = true
				if (i == 0) != (ev.Resume == nil) {
					t.Errorf("invocation %d: resume %+v", i, ev.Resume)
				}
			}
			if last := inv.events[len(inv.events)-1]; last.Resume != nil && tt.name == "continues from each checkpoint" {
				if raw, _ := json.Marshal(last.Resume); string(raw) != `{"offset":20,"state":"MQ=="}` {
					t.Errorf("last invocation resumes from %s, want the second checkpoint's", raw)
				}
			}
		})
	}
}
