package feed

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// countingQueue counts visibility changes, by receipt.
type countingQueue struct {
	*testdouble.Queue
	mu      sync.Mutex
	changes map[string]int
	calls   int
}

func (q *countingQueue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	q.note(receipt)
	return nil
}

func (q *countingQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	q.note(receipts...)
	return nil, nil
}

func (q *countingQueue) note(receipts ...string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.calls++
	for _, r := range receipts {
		q.changes[r]++
	}
}

func (q *countingQueue) snapshot() (calls int, changes map[string]int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.changes))
	for r, n := range q.changes {
		out[r] = n
	}
	return q.calls, out
}

// A message's receive is its first hide: a renewal passes over a held
// message (claimed or not) whose visibility outlasts the next renewal,
// and renews one near its end, or whose visibility is unknown (a Lambda
// batch's). So a task that ends within its receive visibility costs no
// ChangeMessageVisibility; one that runs on is never left to lapse.
func TestRenewalsPassOverMessagesHiddenPastTheNext(t *testing.T) {
	const unknown = time.Duration(-1 << 63)
	t.Parallel()
	for _, tc := range []struct {
		name        string
		left        time.Duration // of its visibility; unknown: added as a Lambda batch's message
		claimed     bool
		wantRenewed bool
	}{
		{"just received, claim pending", tuning.ReceiveVisibility, false, false},
		{"just received and claimed", tuning.ReceiveVisibility, true, false},
		{"received half a second ago, claimed", tuning.ReceiveVisibility - 500*time.Millisecond, true, true},
		{"claim pending, near its end", time.Second, false, true},
		{"already lapsed", -time.Second, true, true},
		{"visibility unknown (a Lambda batch)", unknown, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q := &countingQueue{Queue: testdouble.NewQueue(), changes: map[string]int{}}
			h := newHeldMessages(q, discard())
			m := queue.Message{Queue: "q", Receipt: "r"}
			if tc.left == unknown {
				h.add(m)
			} else {
				// From the subtest's own clock: parallel subtests start
				// late on a loaded machine.
				h.received(m, time.Now().Add(tc.left))
				if tc.claimed {
					h.claim(m) // hold's bookkeeping, without its hide
				}
			}
			h.renew(context.Background())
			if _, changes := q.snapshot(); (changes["r"] == 1) != tc.wantRenewed {
				t.Fatalf("renewal changed the message's visibility %d times; want renewed: %v", changes["r"], tc.wantRenewed)
			}
			if tc.wantRenewed {
				// Renewed, it is hidden past the next renewal.
				h.renew(context.Background())
				if _, changes := q.snapshot(); changes["r"] != 1 {
					t.Fatalf("renewed again right after its renewal (%d changes); want passed over", changes["r"])
				}
			}
		})
	}
}

// A task that ends within its receive visibility makes no visibility
// request at its claim, in the renewals while it runs or at its end: the
// request that a claim's hide used to cost every task.
func TestShortTaskMakesNoVisibilityRequest(t *testing.T) {
	t.Parallel()
	q := &countingQueue{Queue: testdouble.NewQueue(), changes: map[string]int{}}
	h := newHeldMessages(q, discard())
	received := time.Now()
	var ms []queue.Message
	for i := range 10 {
		m := queue.Message{Queue: "q", Receipt: string(rune('a' + i))}
		h.received(m, received.Add(tuning.ReceiveVisibility))
		ms = append(ms, m)
	}
	for _, m := range ms {
		h.hold(context.Background(), m)
	}
	// hideSoon queues a hide before it returns: none is waiting.
	h.hides.mu.Lock()
	pending := len(h.hides.pending)
	h.hides.mu.Unlock()
	if pending != 0 {
		t.Fatalf("%d queues' hides pending for tasks claimed well within their receive visibility", pending)
	}
	h.renew(context.Background()) // a beat's renewal while the tasks run
	for _, m := range ms {
		h.remove(func() {}, m)
	}
	if calls, _ := q.snapshot(); calls != 0 {
		t.Fatalf("%d visibility requests for ten short tasks; want none", calls)
	}
}

// A claim slow enough that its message nears the end of its receive
// visibility hides the message within holdLinger, not at the next beat.
func TestSlowClaimsMessageHiddenAtItsClaim(t *testing.T) {
	t.Parallel()
	q := &countingQueue{Queue: testdouble.NewQueue(), changes: map[string]int{}}
	h := newHeldMessages(q, discard())
	m := queue.Message{Queue: "q", Receipt: "r"}
	h.received(m, time.Now().Add(time.Second))
	h.hold(context.Background(), m)
	h.flushHides("q") // the hold's timer, run now
	if calls, changes := q.snapshot(); calls != 1 || changes["r"] != 1 {
		t.Fatalf("%d requests changing r %d times; want its hide, one request", calls, changes["r"])
	}
}
