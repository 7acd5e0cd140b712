package executor

import (
	"context"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/queue"
)

// activityLog records the feed.Activity calls in order.
type activityLog chan string

func (a activityLog) TaskStarted() { a <- "started" }
func (a activityLog) TaskEnded()   { a <- "ended" }

// The poller tells its feed.Activity (the host's scale-in protection) when a
// slot starts a task and when it ends: started before the task runs,
// ended only once it has finished.
func TestPollerTellsActivityOfEachTask(t *testing.T) {
	t.Parallel()
	cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	started, release := make(chan struct{}), make(chan struct{})
	act := make(activityLog, 10)
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		close(started)
		<-release
		_, err := t.Out.Write([]byte("done\n"))
		return err
	})
	q := newMemQueue()
	q.push(queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: 2, Wait: time.Second, Drain: time.Minute, Log: discard(),
		Activity: act,
	}
	sigterm, runDone := startPoller(t, p, q, started)

	if e := within(t, (<-chan string)(act), 10*time.Second, "TaskStarted"); e != "started" {
		t.Fatalf("first call %q, want started", e)
	}
	select {
	case e := <-act:
		t.Fatalf("%q while the task runs", e)
	default:
	}
	close(release)
	if e := within(t, (<-chan string)(act), 10*time.Second, "TaskEnded"); e != "ended" {
		t.Fatalf("second call %q, want ended", e)
	}
	sigterm()
	if err := within(t, runDone, 10*time.Second, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(act) != 0 {
		t.Errorf("%d more calls, want none", len(act))
	}
}
