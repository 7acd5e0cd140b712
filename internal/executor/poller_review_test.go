package executor

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/queue"
)

// A task function that ends its goroutine (runtime.Goexit: recover does
// not stop it, so safeCall cannot) ends the goroutine its message runs on.
// With a goroutine per message that cost nothing past that task; with the
// poller's workers (feed/workers.go) it ends a worker that the pool still
// counts, so once a slot's worth of such tasks have run, the next message
// is received, its slot taken, and handed to no one: the receiver blocks
// in workers.start for ever, nothing more runs, and Run never returns on
// SIGTERM (its receivers never stop).
func TestPollerTaskEndingItsGoroutineKeepsTheSlotServedReview(t *testing.T) {
	t.Parallel()
	const twoTasks = `{"name":"goexit","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`
	cp := &fakeCP{spec: mustSpec(t, twoTasks), lease: time.Minute}
	exited := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		if t.Ref.Partition == 0 {
			close(exited)
			runtime.Goexit()
		}
		_, err := t.Out.Write([]byte("done\n"))
		return err
	})
	q := newQueue()
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: 1, Wait: time.Second, Drain: time.Minute, Log: discard(),
	}
	ctx, sigterm := context.WithCancel(context.Background())
	defer sigterm()
	runDone := make(chan error, 1)
	go func() { runDone <- p.Run(ctx) }() // not waited for on failure: it never returns
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	within(t, exited, 10*time.Second, "the first task to end its goroutine")
	q.Push("", queue.Message{Queue: "q", ID: "m2", Receipt: "r2", Body: "j1/0/1"})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, commits, _ := cp.snapshot(); len(commits) == 1 {
			break
		}
		if time.Now().After(deadline) {
			claims, _, _ := cp.snapshot()
			t.Fatalf("the second task never ran (claims %v, receives %d): its message was received and handed to no worker", claims, q.Receives())
		}
		time.Sleep(10 * time.Millisecond)
	}
	sigterm()
	select {
	case err := <-runDone:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after SIGTERM")
	}
}
