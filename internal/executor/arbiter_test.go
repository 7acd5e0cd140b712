package executor

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/queue"
)

// classQueues is an in-memory set of ready queues keyed by URL. Receive
// hands out queued messages at once and otherwise long-polls until a push,
// the wait, or ctx ends, as SQS does. It records, in order, the queue of
// every message it hands out, and stops handing out after limit messages
// (0: no limit) so a test reads a fixed-size sample.
type classQueues struct {
	mu     sync.Mutex
	msgs   map[string][]queue.Message
	wake   chan struct{}
	limit  int
	order  []string
	filled chan struct{} // closed when limit messages were handed out
}

func newClassQueues(limit int) *classQueues {
	return &classQueues{msgs: map[string][]queue.Message{}, wake: make(chan struct{}), limit: limit, filled: make(chan struct{})}
}

func (q *classQueues) push(url string, n int) {
	q.mu.Lock()
	for range n {
		id := fmt.Sprintf("%s-%d", url, len(q.msgs[url]))
		q.msgs[url] = append(q.msgs[url], queue.Message{Queue: url, ID: id, Receipt: id, Body: "j1/0/0"})
	}
	close(q.wake) // wake every long poll
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

func (q *classQueues) Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		q.mu.Lock()
		if k := min(maxN, len(q.msgs[url])); k > 0 && (q.limit == 0 || len(q.order) < q.limit) {
			if q.limit > 0 {
				k = min(k, q.limit-len(q.order))
			}
			out := q.msgs[url][:k:k]
			q.msgs[url] = q.msgs[url][k:]
			for range k {
				q.order = append(q.order, url)
			}
			if q.limit > 0 && len(q.order) == q.limit {
				close(q.filled)
			}
			q.mu.Unlock()
			return out, nil
		}
		wake := q.wake
		q.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return nil, nil
		case <-wake:
		}
	}
}

func (q *classQueues) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	return nil
}

func (q *classQueues) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	return nil, nil
}

func (q *classQueues) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	return nil
}

func (q *classQueues) received() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.order...)
}

func runPoller(t *testing.T, p *feed.Poller) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		within(t, done, 10*time.Second, "Run to return")
	})
}

// With a flood of low-priority messages keeping every slot busy, a high
// message is received in the next polling round: before more than one
// slot's worth of low messages.
func TestPollerHighBeatsLowFlood(t *testing.T) {
	t.Parallel()
	const slots = 6
	q := newClassQueues(0)
	q.push("low", 5000)
	var mu sync.Mutex
	lows := 0
	reachedFlood := make(chan struct{})
	reg := NewRegistry()
	reg.Register("work", func(ctx context.Context, t *Task) error {
		time.Sleep(time.Millisecond) // a task takes time; not synchronisation
		return nil
	})
	cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	p := &feed.Poller{
		Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
		CP:      cp,
		Queue:   q, Queues: []string{"high", "normal", "low"}, Slots: slots, Wait: 5 * time.Second, Log: discard(),
	}
	go func() {
		// Watch the sample until the flood is running steadily.
		for {
			mu.Lock()
			lows = len(q.received())
			mu.Unlock()
			if lows >= 200 {
				close(reachedFlood)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	runPoller(t, p)
	within(t, reachedFlood, 20*time.Second, "the low flood to run")
	before := len(q.received())
	q.push("high", 1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := q.received()
		for i, url := range got[before:] {
			if url == "high" {
				// Low receives already in flight when the push landed may
				// complete first: at most one per slot.
				if i > slots {
					t.Fatalf("high received after %d more low messages, want at most %d", i, slots)
				}
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("high message not received after %d more low messages", len(got)-before)
		}
		time.Sleep(time.Millisecond)
	}
}

// With every class backlogged, each class's share of received messages
// matches its weight, and low is never starved.
func TestPollerWeightedShares(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		weights []int
		want    map[string]float64
	}{
		{"default 6:3:1", nil, map[string]float64{"high": 0.6, "normal": 0.3, "low": 0.1}},
		{"configured 1:1:2", []int{1, 1, 2}, map[string]float64{"high": 0.25, "normal": 0.25, "low": 0.5}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			const sample = 1000
			q := newClassQueues(sample)
			for _, url := range []string{"high", "normal", "low"} {
				q.push(url, sample)
			}
			reg := NewRegistry()
			// Tasks take a few milliseconds, far longer than a fake receive,
			// so slots are the bottleneck and the receivers queue for them,
			// as under a real backlog. (A work duration, not a wait for
			// another goroutine.)
			reg.Register("work", func(ctx context.Context, t *Task) error {
				time.Sleep(5 * time.Millisecond)
				return nil
			})
			cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
			p := &feed.Poller{
				Handler: &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard()},
				CP:      cp,
				Queue:   q, Queues: []string{"high", "normal", "low"}, Weights: tc.weights, Slots: 8, Wait: time.Second, Log: discard(),
			}
			runPoller(t, p)
			within(t, q.filled, 30*time.Second, "the sample to be received")
			got := map[string]int{}
			for _, url := range q.received() {
				got[url]++
			}
			for url, share := range tc.want {
				frac := float64(got[url]) / sample
				// The first receives of an idle executor take an equal share
				// each; after that the weights rule. 0.05 absorbs that start.
				if frac < share-0.05 || frac > share+0.05 {
					t.Errorf("%s got %d of %d (%.3f), want %.2f±0.05; all %v", url, got[url], sample, frac, share, got)
				}
			}
		})
	}
}
