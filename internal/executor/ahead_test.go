package executor

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
)

// receiveCountingQueue counts the messages its receives return.
type receiveCountingQueue struct {
	*testdouble.Queue
	mu       sync.Mutex
	received []string // receipts, in the order received
}

func (q *receiveCountingQueue) Receive(ctx context.Context, url string, maxN int, wait, vis time.Duration) ([]queue.Message, error) {
	ms, err := q.Queue.Receive(ctx, url, maxN, wait, vis)
	q.mu.Lock()
	for _, m := range ms {
		q.received = append(q.received, m.Receipt)
	}
	q.mu.Unlock()
	return ms, err
}

func (q *receiveCountingQueue) receipts() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.received...)
}

// aheadRig is a poller of aheadSlots slots with a backlog: aheadSlots
// short tasks, then long ones that run until release.
type aheadRig struct {
	cp       *fakeCP
	q        *receiveCountingQueue
	slowRun  chan int // a long task's partition as it starts
	release  chan struct{}
	sigterm  func()
	runDone  chan error
	released sync.Once
}

const (
	aheadSlots = 4
	aheadBatch = aheadSlots // min(10, slots): one batch ahead
	aheadTasks = 40
)

// startAheadRig runs the poller over the backlog; live gives it a liveness
// record (liveCP), without which it never receives ahead.
func startAheadRig(t *testing.T, live bool) *aheadRig {
	t.Helper()
	body := fmt.Sprintf(`{"name":"ahead","stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, aheadTasks)
	r := &aheadRig{
		cp:      &fakeCP{spec: mustSpec(t, body), lease: time.Minute},
		q:       &receiveCountingQueue{Queue: newQueue()},
		slowRun: make(chan int, aheadTasks),
		release: make(chan struct{}),
		runDone: make(chan error, 1),
	}
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		if t.Ref.Partition >= aheadSlots {
			r.slowRun <- t.Ref.Partition
			<-r.release
		}
		_, err := t.Out.Write([]byte("done\n"))
		return err
	})
	for i := range aheadTasks {
		r.q.Push("", queue.Message{Queue: "q", ID: "m" + strconv.Itoa(i), Receipt: "r" + strconv.Itoa(i), Body: "j1/0/" + strconv.Itoa(i)})
	}
	var cp ControlPlane = r.cp
	if live {
		cp = &liveCP{fakeCP: r.cp, renewed: make(chan struct{})}
	}
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   r.q, Queues: []string{"q"}, Slots: aheadSlots, Wait: time.Second, Drain: time.Minute, Log: discard(),
	}
	ctx, stop := context.WithCancel(context.Background())
	r.sigterm = stop
	go func() { r.runDone <- p.Run(ctx) }()
	t.Cleanup(func() {
		r.releaseAll()
		stop()
		within(t, r.runDone, 10*time.Second, "Run to return")
	})
	// The slots fill with long tasks once the short ones have run.
	for i := range aheadSlots {
		within(t, r.slowRun, 10*time.Second, fmt.Sprintf("long task %d to start", i+1))
	}
	return r
}

func (r *aheadRig) releaseAll() { r.released.Do(func() { close(r.release) }) }

// waitReceived waits until n messages have been received.
func (r *aheadRig) waitReceived(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(r.q.receipts()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d messages received, want %d", len(r.q.receipts()), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// unclaimed are the received messages whose tasks were never claimed.
func (r *aheadRig) unclaimed() []string {
	claims, _, _ := r.cp.snapshot()
	claimed := map[domain.TaskRef]bool{}
	for _, c := range claims {
		claimed[c] = true
	}
	var out []string
	for _, receipt := range r.q.receipts() {
		p, _ := strconv.Atoi(receipt[1:])
		if !claimed[domain.TaskRef{Job: "j1", Stage: 0, Partition: p}] {
			out = append(out, receipt)
		}
	}
	return out
}

// A poller with a liveness record receives one batch ahead of its slots
// once its tasks have been short and its queue backlogged: those messages
// wait unclaimed for the first slot to free. Without a liveness record
// (nothing would renew them while they wait) it receives no more than its
// slots.
func TestPollerReceivesOneBatchAheadOnlyWithLiveness(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		live bool
		want int
	}{
		{"liveness: the short tasks, the slots, one batch ahead", true, aheadSlots + aheadSlots + aheadBatch},
		{"no liveness: the short tasks and the slots", false, aheadSlots + aheadSlots},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := startAheadRig(t, c.live)
			r.waitReceived(t, c.want)
			// Every slot is held by a long task: a poller that received
			// past its bound does it at once. A bounded window for a bug
			// to show, not a synchronisation.
			time.Sleep(100 * time.Millisecond)
			if got := len(r.q.receipts()); got != c.want {
				t.Fatalf("%d messages received, want %d", got, c.want)
			}
			if got, want := len(r.unclaimed()), c.want-2*aheadSlots; got != want {
				t.Errorf("%d received messages unclaimed (%v), want %d waiting for a slot", got, r.unclaimed(), want)
			}
		})
	}
}

// On SIGTERM the messages received ahead go back to the queue at once
// (visibility 0), unclaimed, without waiting for the running tasks; the
// running tasks still finish and commit.
func TestPollerGivesBackWhatWaitsAheadOnSIGTERM(t *testing.T) {
	t.Parallel()
	r := startAheadRig(t, true)
	r.waitReceived(t, 2*aheadSlots+aheadBatch)
	waiting := r.unclaimed()
	if len(waiting) != aheadBatch {
		t.Fatalf("%d messages waiting ahead (%v), want %d", len(waiting), waiting, aheadBatch)
	}
	r.sigterm()
	waitShownAgain(t, r.q.Queue, waiting, "received ahead, not given back while the running tasks hold their slots")
	r.releaseAll()
	if err := within(t, r.runDone, 10*time.Second, "Run to return"); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.runDone <- nil // for the cleanup
	claims, commits, _ := r.cp.snapshot()
	if len(claims) != 2*aheadSlots || len(commits) != 2*aheadSlots {
		t.Errorf("%d claims and %d commits, want %d of each: the drained tasks, none of the given back", len(claims), len(commits), 2*aheadSlots)
	}
	if got := r.unclaimed(); len(got) != aheadBatch {
		t.Errorf("unclaimed %v, want the %d given back", got, aheadBatch)
	}
}

// Messages received ahead that wait past aheadWait (the slots filled with
// long tasks) go back to the queue, and the poller stops receiving ahead:
// it receives nothing more while its slots stay full.
func TestPollerGivesBackWhatWaitsAheadBehindLongTasks(t *testing.T) {
	t.Parallel()
	r := startAheadRig(t, true)
	r.waitReceived(t, 2*aheadSlots+aheadBatch)
	waiting := r.unclaimed()
	waitShownAgain(t, r.q.Queue, waiting, "waited ahead behind long tasks and was not given back")
	// Given back, the ahead's slots are gone with them: a poller that
	// still received ahead would receive again at once.
	time.Sleep(100 * time.Millisecond) // a bounded window for a bug to show
	if got, want := len(r.q.receipts()), 2*aheadSlots+aheadBatch; got != want {
		t.Errorf("%d messages received after the give-back, want %d: no receive while the slots are full", got, want)
	}
	if claims, _, _ := r.cp.snapshot(); len(claims) != 2*aheadSlots {
		t.Errorf("%d claims, want %d: none of the given back", len(claims), 2*aheadSlots)
	}
}

// waitShownAgain waits until every receipt's visibility was set to 0.
func waitShownAgain(t *testing.T, q *testdouble.Queue, receipts []string, what string) {
	t.Helper()
	for _, receipt := range receipts {
		deadline := time.Now().Add(10 * time.Second)
		for !shownAgain(q, receipt) {
			if time.Now().After(deadline) {
				t.Fatalf("message %s %s (visibility changes %v)", receipt, what, q.Visibility(receipt))
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// shownAgain reports whether receipt's visibility was set to 0.
func shownAgain(q *testdouble.Queue, receipt string) bool {
	for _, d := range q.Visibility(receipt) {
		if d == 0 {
			return true
		}
	}
	return false
}
