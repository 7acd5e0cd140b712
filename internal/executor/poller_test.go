package executor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/queue"
)

const oneTask = `{"name":"drain","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`

// startPoller runs p until the returned cancel (the SIGTERM) and waits for
// the first message to be handed to a slot and the receiver to be back in
// its long poll, so the test cancels a poller that is both running a task
// and receiving.
func startPoller(t *testing.T, p *feed.Poller, q *memQueue, started <-chan struct{}) (cancel func(), runDone <-chan error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		done <- p.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		<-returned
	})
	if n := within(t, q.entered, 10*time.Second, "the first receive"); n != 1 {
		t.Fatalf("receive call %d, want 1", n)
	}
	within(t, started, 10*time.Second, "the task to start")
	if n := within(t, q.entered, 10*time.Second, "the receiver to poll again"); n != 2 {
		t.Fatalf("receive call %d, want 2", n)
	}
	return stop, done
}

func TestPollerDrainLetsRunningTaskFinish(t *testing.T) {
	t.Parallel()
	cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	started, release := make(chan struct{}), make(chan struct{})
	taskCtxErr := make(chan error, 1)
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		close(started)
		select {
		case <-release:
		case <-ctx.Done():
		}
		taskCtxErr <- ctx.Err()
		_, err := t.Out.Write([]byte("done\n"))
		return err
	})
	q := newMemQueue()
	q.push(queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: 2, Wait: time.Second, Drain: time.Minute, Log: discard(),
	}
	sigterm, runDone := startPoller(t, p, q, started)

	sigterm()
	if n := within(t, q.left, 10*time.Second, "the receiver's long poll to end"); n != 1 {
		t.Fatalf("receive %d returned, want 1", n)
	}
	if n := within(t, q.left, 10*time.Second, "the receiver's long poll to end"); n != 2 {
		t.Fatalf("receive %d returned, want 2", n)
	}
	// The receiver has stopped. Give a wrong Run a moment to return early
	// or cancel the task: a bounded window for a bug to show, not a
	// synchronisation (a correct Run does neither, however long we wait).
	select {
	case <-runDone:
		t.Fatal("Run returned while its task was still running")
	case err := <-taskCtxErr:
		t.Fatalf("the task's context ended during the drain: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if err := within(t, runDone, 10*time.Second, "Run to return after the task finished"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if err := <-taskCtxErr; err != nil {
		t.Errorf("the task's context was cancelled during the drain: %v", err)
	}
	_, commits, fails := cp.snapshot()
	if len(commits) != 1 || len(fails) != 0 {
		t.Errorf("commits %v, fails %v; want the drained task committed once", commits, fails)
	}
	receives, deleted := q.state()
	if !slices.Equal(deleted, []string{"r1"}) {
		t.Errorf("deleted %v by the time Run returned, want [r1]", deleted)
	}
	if receives != 2 {
		t.Errorf("%d receives, want 2: none after SIGTERM", receives)
	}
}

func TestPollerDrainTimeoutCancelsTask(t *testing.T) {
	t.Parallel()
	cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	started := make(chan struct{})
	taskCtxErr := make(chan error, 1)
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		close(started)
		<-ctx.Done() // a task that never finishes on its own
		taskCtxErr <- ctx.Err()
		return ctx.Err()
	})
	q := newMemQueue()
	q.push(queue.Message{Queue: "q", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	const drain = 200 * time.Millisecond
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"q"}, Slots: 2, Wait: time.Second, Drain: drain, Log: discard(),
	}
	sigterm, runDone := startPoller(t, p, q, started)

	cancelled := time.Now()
	sigterm()
	if err := within(t, runDone, 10*time.Second, "Run to give up after the drain timeout"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if waited := time.Since(cancelled); waited < drain {
		t.Errorf("Run returned %s after SIGTERM, before the %s drain period", waited, drain)
	}
	select {
	case err := <-taskCtxErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("task context ended with %v, want context.Canceled", err)
		}
	default:
		t.Fatal("Run returned but the task was not cancelled")
	}
	_, commits, _ := cp.snapshot()
	if len(commits) != 0 {
		t.Errorf("commits %v: an abandoned task must not commit", commits)
	}
	// The abandoned task's message stays: it returns when the lease ends
	// and the next executor reclaims the task.
	if receives, deleted := q.state(); len(deleted) != 0 || receives != 2 {
		t.Errorf("deleted %v after %d receives; want no delete and no receive after SIGTERM", deleted, receives)
	}
}

// urlQueue is a queue per URL whose Receive long-polls as SQS does: it
// returns a message of its URL at once, or waits up to wait for one.
type urlQueue struct {
	mu        sync.Mutex
	msgs      map[string][]queue.Message
	wake      chan struct{}
	waits     []time.Duration
	*memQueue // visibility changes and deletes
}

func (q *urlQueue) push(m queue.Message) {
	q.mu.Lock()
	q.msgs[m.Queue] = append(q.msgs[m.Queue], m)
	close(q.wake) // wakes every waiting Receive
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

func (q *urlQueue) Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error) {
	q.mu.Lock()
	q.waits = append(q.waits, wait)
	q.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		q.mu.Lock()
		if ms := q.msgs[url]; len(ms) > 0 {
			k := min(maxN, len(ms))
			q.msgs[url] = ms[k:]
			q.mu.Unlock()
			return ms[:k], nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-wake:
		}
	}
}

// An executor with fewer slots than ready queues still serves every
// queue: a message on the lowest class is run promptly, not after the
// higher classes' long polls have held the only slot for 20 s each.
func TestPollerFewerSlotsThanQueues(t *testing.T) {
	t.Parallel()
	cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	ran := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		close(ran)
		return nil
	})
	q := &urlQueue{msgs: map[string][]queue.Message{}, wake: make(chan struct{}), memQueue: newMemQueue()}
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"high", "normal", "low"}, Slots: 1, Wait: 20 * time.Second, Log: discard(),
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	q.push(queue.Message{Queue: "low", ID: "m1", Receipt: "r1", Body: "j1/0/0"})
	// Bounds a wait that the bug makes 20 s or more; it synchronises nothing.
	within(t, ran, 10*time.Second, "the low queue's task to run")
	q.mu.Lock()
	defer q.mu.Unlock()
	// feed's idleWaitShared: the idle long poll when slots are fewer than
	// queues.
	const idleWaitShared = time.Second
	for _, w := range q.waits {
		if w > idleWaitShared {
			t.Fatalf("a receive waited %v with 1 slot for 3 queues; want at most %v", w, idleWaitShared)
		}
	}
}
