package executor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/queue"
)

// A task that ends its goroutine (runtime.Goexit, which recover does not
// stop) skips handle's held.remove: with a liveness record its message
// stays in the held set and the beat renews it every half second for as
// long as the executor lives. The message never comes back, so the task
// is neither retried nor failed (its claim is live with a live holder):
// the job hangs. The worker pool and the arbiter survive the Goexit
// (workers.go, the deferred arb.done); the held set does not.
func TestPollerGoexitTaskMessageNotRenewedForeverReview(t *testing.T) {
	t.Parallel()
	const oneTask = `{"name":"goexit","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`
	cp := &liveCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}, renewed: make(chan struct{})}
	exited := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		close(exited)
		runtime.Goexit()
		return nil
	})
	q := newQueue()
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: 1, Wait: time.Second, Drain: time.Minute, Log: discard(),
	}
	ctx, sigterm := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }()
	defer func() {
		sigterm()
		within(t, runDone, 10*time.Second, "Run to return")
	}()
	within(t, exited, 10*time.Second, "the task to end its goroutine")
	// A renewal in flight at the Goexit may still land; none after. Bounded
	// windows for a bug to show: the beat renews every ExecutorBeat.
	time.Sleep(time.Second)
	before := len(q.Visibility("r1"))
	time.Sleep(2 * time.Second)
	if after := len(q.Visibility("r1")); after > before {
		t.Errorf("the message of a task that ended its goroutine was renewed %d more times in 2 s (changes %v): held for ever, never retried", after-before, q.Visibility("r1"))
	}
	if _, _, fails := cp.snapshot(); len(fails) != 1 {
		t.Errorf("%d failures recorded, want the attempt that ended its goroutine failed (retried)", len(fails))
	}
}
