package executor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// commitRecorder is fakeCP that commits as control.Service does for its
// own runner: it records how (written here or checked) and with how many
// outputs.
type commitRecorder struct {
	*fakeCP
	mu  sync.Mutex
	how []string
	n   []int
}

func (c *commitRecorder) record(how string, r control.CommitResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.how = append(c.how, how)
	c.n = append(c.n, r.Outputs)
}

func (c *commitRecorder) Commit(ctx context.Context, cl control.Claim, r control.CommitResult) error {
	how := "checked"
	if r.WrittenHere {
		how = "written"
	}
	c.record(how, r)
	return c.fakeCP.Commit(ctx, cl, r)
}

// A task that writes nothing writes no object and commits no output; one
// that writes commits what it put, as written here (no listing: its own
// puts proved the objects exist).
func TestTaskWithoutOutputWritesNoObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		write       func(*Task) error
		wantObjects int
		wantOutputs int
	}{
		{"writes nothing", func(*Task) error { return nil }, 0, 0},
		{"writes zero bytes", func(t *Task) error { _, err := t.Out.Write(nil); return err }, 0, 0},
		{"writes a line", func(t *Task) error { _, err := t.Out.Write([]byte("x\n")); return err }, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, t *Task) error { return tc.write(t) })
			cp := &commitRecorder{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}}
			b := newBlob()
			r := &Runner{CP: cp, Blob: b, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			if res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil); res.Action != feed.Delete || res.Err != nil {
				t.Fatalf("result %+v, want a commit", res)
			}
			objects := len(b.Keys(""))
			if objects != tc.wantObjects {
				t.Errorf("%d objects written, want %d", objects, tc.wantObjects)
			}
			if len(cp.how) != 1 || cp.how[0] != "written" || cp.n[0] != tc.wantOutputs {
				t.Errorf("commits %v with outputs %v, want one commit written here of %d", cp.how, cp.n, tc.wantOutputs)
			}
		})
	}
}

// A lambda stage's function writes its objects itself: its empty buffer
// is not "no output", so the runner still publishes (and finds) them.
func TestLambdaStageIsNeverNoOutput(t *testing.T) {
	t.Parallel()
	r := &Runner{}
	c := control.Claim{Spec: mustSpec(t, lambdaOne)}
	if r.noOutput(c, &Task{Out: output.New(1, 0)}) {
		t.Fatal("a lambda stage's attempt counted as writing no output")
	}
	c = control.Claim{Spec: mustSpec(t, oneTask)}
	if !r.noOutput(c, &Task{Out: output.New(1, 0)}) {
		t.Fatal("an empty Go task's attempt not counted as writing no output")
	}
}

// Messages received together are renewed together when their receive
// visibility nears its end: one ChangeMessageVisibilityBatch for up to
// ten, never a ChangeMessageVisibility each, and before that visibility
// (four beats) lapses.
func TestClaimedMessagesAreRenewedInBatches(t *testing.T) {
	t.Parallel()
	cp := &beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, `{"name":"b","stages":[{"name":"s","task":"work","partitions":{"count":10}}]}`), lease: time.Minute}}
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		<-release
		return nil
	})
	q := &visQueue{Queue: newQueue(), changed: make(chan visChange, 1000)}
	for i := range 10 {
		r := string(rune('a' + i))
		q.Push("", queue.Message{Queue: "q", ID: "m" + r, Receipt: "r" + r, Body: "j1/0/" + string(rune('0'+i))})
	}
	heldPoller(t, cp, q, reg, 10)
	t.Cleanup(func() { close(release) })
	hidden := map[string]bool{}
	for len(hidden) < 10 {
		c := within(t, q.changed, 10*time.Second, "the claimed messages' renewals")
		if c.d != tuning.HeldVisibility {
			continue // a renewal of a message still being claimed
		}
		if !c.batch {
			t.Fatalf("%s hidden alone; want its hide batched with the others claimed with it", c.receipt)
		}
		hidden[c.receipt] = true
	}
	if n, lapse := cp.beatsSoFar(), int(tuning.ReceiveVisibility/tuning.ExecutorBeat); n >= lapse {
		t.Fatalf("the claimed messages were renewed after %d beats; their receive visibility lapses at the %dth", n, lapse)
	}
}
