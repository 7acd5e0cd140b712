package executor

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// Review: the poller takes a message's hide to start when its receive was
// sent (poller.go: start := time.Now() before Receive), but a long poll
// returns a message, and SQS hides it, when the message arrives: up to
// ReceiveWait (1 s) later. An idle executor whose long poll waits more
// than half a second before a message arrives therefore finds, at the
// claim, less than renewSlack left of a visibility that really has almost
// all of its 2 s, and sends a hide for every such task: the request the
// change says a short task no longer costs ("its receive is its first
// hide", held.go renewSlack). A task that ends within a fraction of its receive visibility must make no
// visibility request, however long the poll that brought it waited.
// (One that ends within holdLinger, 100 ms, escapes: its hide is dropped.)
func TestReviewLongPolledShortTaskMakesNoVisibilityRequest(t *testing.T) {
	t.Parallel()
	cp := &beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}}
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		time.Sleep(300 * time.Millisecond) // short: well within its receive visibility
		return nil
	})
	q := &visQueue{Queue: newQueue(), changed: make(chan visChange, 100)}
	heldPoller(t, cp, q, reg, 1)
	within(t, q.Entered(), 10*time.Second, "the idle executor's long poll")
	time.Sleep(800 * time.Millisecond) // the message arrives late in the poll
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(q.Deleted(), "r1") {
		if time.Now().After(deadline) {
			t.Fatal("r1 not deleted within 5 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		select {
		case c := <-q.changed:
			if c.receipt == "r1" {
				t.Fatalf("visibility change %+v for a 300 ms task, received by a long poll that waited 0.8 s; want none (its receive hid it for 2 s)", c)
			}
		default:
			return
		}
	}
}
