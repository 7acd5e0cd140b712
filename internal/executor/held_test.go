package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
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

func (r retryCP) Fail(context.Context, control.Claim, control.FailParams) (control.Decision, error) {
	return control.Decision{Retry: true, Delay: time.Minute}, nil
}

// stuckQueue is a queue whose single-message visibility changes (a
// task's hide) hang until released, as a throttled SQS can.
type stuckQueue struct {
	*testdouble.Queue
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
	q := &stuckQueue{Queue: newQueue(), stuck: make(chan struct{}, 1), release: make(chan struct{})}
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &feed.Poller{
		Handler: &Runner{CP: retryCP{cp}, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      retryCP{cp},
		Queue:   q, Queues: []string{"q"}, Slots: 2, Wait: time.Second, Log: discard(),
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

// A received message is hidden tuning.ReceiveVisibility (four beats) by
// its receive, and no more at its claim: a task still running when that
// nears its end must have its message renewed before it lapses, or the
// message comes back to another executor while its holder looks well,
// and waits out the task's lease.
func TestClaimedMessageRenewedBeforeItsReceiveVisibilityLapses(t *testing.T) {
	t.Parallel()
	cp := &beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}}
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		<-release
		return nil
	})
	q := &visQueue{Queue: newQueue(), changed: make(chan visChange, 100)}
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	heldPoller(t, cp, q, reg, 1)
	t.Cleanup(func() { close(release) })
	c := within(t, q.changed, 10*time.Second, "the claimed message's renewal")
	if c.receipt != "r1" || c.d != tuning.HeldVisibility {
		t.Fatalf("first visibility change %+v; want r1 renewed for the held visibility", c)
	}
	if claims, _, _ := cp.snapshot(); len(claims) != 1 {
		t.Fatalf("renewed with %d claims made; want after the claim", len(claims))
	}
	if n, lapse := cp.beatsSoFar(), int(tuning.ReceiveVisibility/tuning.ExecutorBeat); n >= lapse {
		t.Fatalf("the message was first renewed after %d beats; its receive visibility lapses at the %dth", n, lapse)
	}
}

// slowClaimCP is beatCountingCP whose claims wait until released.
type slowClaimCP struct {
	*beatCountingCP
	release chan struct{}
}

func (s *slowClaimCP) Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return s.beatCountingCP.Claim(ctx, ref)
}

// A claim slower than the receive visibility must not let its message go
// to another executor, which would find the fresh claim held and hide the
// message for the task's whole lease: the message is renewed at the
// receive visibility until its claim is granted.
func TestSlowClaimKeepsItsMessageHidden(t *testing.T) {
	t.Parallel()
	cp := &slowClaimCP{beatCountingCP: &beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}}, release: make(chan struct{})}
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error { return nil })
	q := &visQueue{Queue: newQueue(), changed: make(chan visChange, 100)}
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	heldPoller(t, cp, q, reg, 1)
	defer close(cp.release)
	for {
		c := within(t, q.changed, 10*time.Second, "a renewal of the message while its claim is pending")
		if c.receipt == "r1" && c.d == tuning.UnclaimedVisibility {
			return
		}
	}
}

// hangingHideCP fails every task with a retry; its second task runs until
// released.
type hangingHideCP struct {
	*beatCountingCP
}

func (h hangingHideCP) Fail(context.Context, control.Claim, control.FailParams) (control.Decision, error) {
	return control.Decision{Retry: true, Delay: time.Minute}, nil
}

// A task's hide that hangs (a throttled or stuck request) must not stop
// the renewals of the executor's other messages: they would lapse while
// their tasks run.
func TestHangingHideDoesNotStopRenewals(t *testing.T) {
	t.Parallel()
	cp := hangingHideCP{&beatCountingCP{fakeCP: &fakeCP{spec: mustSpec(t, twoTasks), lease: time.Minute}}}
	release := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		if t.Ref.Partition == 0 {
			return errors.New("fails")
		}
		<-release
		return nil
	})
	q := &visQueue{Queue: newQueue(), changed: make(chan visChange, 1000), hang: time.Minute}
	q.Push("", queue.Message{Queue: "q", ID: "m0", Receipt: "r0", Body: "j1/0/0"})
	q.Push("", queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/1"})
	heldPoller(t, cp, q, reg, 2)
	t.Cleanup(func() { close(release) })
	hideSeen := false
	for {
		c := within(t, q.changed, 10*time.Second, "a renewal of r1 after r0's hide hung")
		switch {
		case c.receipt == "r0" && c.d == time.Minute:
			hideSeen = true
		case hideSeen && c.receipt == "r1" && c.d == tuning.HeldVisibility && c.batch:
			return
		}
	}
}

const twoTasks = `{"name":"two","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`

// heldPoller runs a poller of slots over queue "q" until the test ends.
func heldPoller(t *testing.T, cp ControlPlane, q feed.Queue, reg *Registry, slots int) {
	t.Helper()
	runPoller(t, &feed.Poller{
		Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: slots, Wait: time.Second, Log: discard(),
	})
}

type visChange struct {
	receipt string
	d       time.Duration
	batch   bool
}

// visQueue is a queue that reports every visibility change; a single
// change for the hang duration hangs until its context ends.
type visQueue struct {
	*testdouble.Queue
	changed chan visChange
	hang    time.Duration
}

func (q *visQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	q.changed <- visChange{receipt: receipt, d: d}
	if q.hang != 0 && d == q.hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return q.Queue.ChangeVisibility(ctx, url, receipt, d)
}

func (q *visQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	for _, r := range receipts {
		q.changed <- visChange{receipt: r, d: d, batch: true}
	}
	return q.Queue.ChangeVisibilityBatch(ctx, url, receipts, d)
}
