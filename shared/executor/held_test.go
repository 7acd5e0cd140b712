package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
)

// liveCP is fakeCP with a liveness record; each renewal is signalled.
type liveCP struct {
	*fakeCP
	renewed chan struct{}
}

func (l *liveCP) ExecutorAlive(ctx context.Context, id string) error {
	select {
	case l.renewed <- struct{}{}:
	default: // nobody is counting now
	}
	return ctx.Err()
}

// retryCP fails every task with a retry, so its message is hidden.
type retryCP struct{ *liveCP }

func (r retryCP) Fail(ctx context.Context, c control.Claim, cause string) (control.Decision, error) {
	return control.Decision{Retry: true, Delay: time.Minute}, nil
}

// stuckQueue is memQueue whose single-message visibility changes (a
// task's hide) hang until released, as a throttled SQS can.
type stuckQueue struct {
	*memQueue
	stuck   chan struct{}
	release chan struct{}
}

func (q *stuckQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	q.stuck <- struct{}{}
	select {
	case <-q.release:
	case <-ctx.Done():
	}
	return nil
}

// A hide that hangs must not stop the executor's liveness renewals:
// others would judge a live executor dead and take its tasks over.
func TestSlowHideDoesNotStopLiveness(t *testing.T) {
	t.Parallel()
	cp := &liveCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}, renewed: make(chan struct{})}
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error { return errors.New("fails") })
	q := &stuckQueue{memQueue: newMemQueue(), stuck: make(chan struct{}, 1), release: make(chan struct{})}
	q.push(queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &Poller{
		Runner: &Runner{CP: retryCP{cp}, Blob: &memBlob{}, Registry: reg, Log: discard()},
		Queue:  q, Queues: []string{"q"}, Slots: 2, Wait: time.Second, Log: discard(),
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { close(q.release); stop(); <-done })
	within(t, q.stuck, 10*time.Second, "the task's hide")
	// While the hide hangs, the beat keeps renewing (the bound is for a
	// bug that stops it; it synchronises nothing).
	for i := range 2 {
		within(t, cp.renewed, 10*time.Second, fmt.Sprintf("liveness renewal %d while a hide hangs", i+1))
	}
}
