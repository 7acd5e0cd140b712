package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
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

// beatCountingCP counts liveness beats after the first record, and holds
// each task until released.
type beatCountingCP struct {
	*fakeCP
	mu    sync.Mutex
	beats int
}

func (b *beatCountingCP) ExecutorAlive(ctx context.Context, id string) error {
	b.mu.Lock()
	b.beats++
	b.mu.Unlock()
	return nil
}

func (b *beatCountingCP) beatsSoFar() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.beats - 1 // the record written before any receive
}

// holdQueue is memQueue that reports each change of a message's
// visibility to the held visibility.
type holdQueue struct {
	*memQueue
	held chan string
}

func (q *holdQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	err := q.memQueue.ChangeVisibility(ctx, url, receipt, d)
	if d == tuning.HeldVisibility {
		q.held <- receipt
	}
	return err
}

func (q *holdQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	for _, r := range receipts {
		if err := q.ChangeVisibility(ctx, url, r, d); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// A received message is hidden only tuning.ReceiveVisibility: once its
// task is claimed it must be hidden for the held visibility at once, not
// at the next beat, or under a slow start it comes back to another
// executor while its holder looks well, and waits out the task's lease.
func TestClaimedMessageHiddenAtOnce(t *testing.T) {
	t.Parallel()
	cp := &beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}}
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		<-release
		return nil
	})
	q := &holdQueue{memQueue: newMemQueue(), held: make(chan string, 100)}
	q.push(queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &Poller{
		Runner: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		Queue:  q, Queues: []string{"q"}, Slots: 1, Wait: time.Second, Log: discard(),
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { close(release); stop(); <-done })
	if got := within(t, q.held, 10*time.Second, "the claimed message's hide"); got != "r1" {
		t.Fatalf("hid %s, want r1", got)
	}
	if n := cp.beatsSoFar(); n != 0 {
		t.Fatalf("the message was first hidden after %d beats; want at its claim, before any", n)
	}
	if claims, _, _ := cp.snapshot(); len(claims) != 1 {
		t.Fatalf("hidden with %d claims made; want after the claim", len(claims))
	}
}
