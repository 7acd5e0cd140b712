package feed

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// hangQueue hangs a visibility change of receipt "n" (a claim's hide on a
// throttled SQS) until its context ends, and notes when each other
// receipt's change was sent (the request's, even when n shares it).
type hangQueue struct {
	*testdouble.Queue
	mu   sync.Mutex
	sent map[string]time.Time
	hung chan struct{} // closed when n's change first hangs
	once sync.Once
}

func (q *hangQueue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) ([]string, error) {
	q.mu.Lock()
	for _, r := range receipts {
		if _, ok := q.sent[r]; !ok && r != "n" {
			q.sent[r] = time.Now()
		}
	}
	q.mu.Unlock()
	if slices.Contains(receipts, "n") {
		q.once.Do(func() { close(q.hung) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return nil, nil
}

// A renewal waits for the renewal lock, which a claim's hide (flushHides)
// holds while its request runs. A long task's message m passed over by
// one renewal with just over renewSlack left must still be renewed by the
// next renewal before it lapses, though another message's hide, taken in
// between, hangs: else m comes back under a live claim (bounced every
// second or two for the rest of the task, its holder's receipt gone).
// renewSlack covers lockedHide, the bound of such a hide.
func TestHangingClaimHideDoesNotLetAPassedOverMessageLapse(t *testing.T) {
	t.Parallel()
	q := &hangQueue{Queue: testdouble.NewQueue(), sent: map[string]time.Time{}, hung: make(chan struct{})}
	h := newHeldMessages(q, discard())
	m := queue.Message{Queue: "q", Receipt: "m"}
	// m's task runs on; its last renewal left it just over renewSlack.
	until := time.Now().Add(renewSlack + 50*time.Millisecond)
	h.received(m, until)
	h.claim(m)
	h.renew(context.Background()) // a beat's renewal: passes m over
	if _, ok := q.sent["m"]; ok {
		t.Fatal("m renewed with more than renewSlack left; the scenario needs it passed over")
	}
	// Before the next beat's renewal (half a second on), another task's
	// slow claim: its message n is near its end, and its hide (holdLinger
	// after the claim) hangs.
	time.Sleep(300 * time.Millisecond)
	n := queue.Message{Queue: "q", Receipt: "n"}
	h.received(n, time.Now().Add(time.Second))
	h.hold(context.Background(), n)
	go h.flushHides("q")
	<-q.hung // the hide holds the renewal lock
	// The next beat's renewal, half a second after the last.
	ctx, cancel := context.WithTimeout(context.Background(), tuning.ExecutorLease-tuning.ExecutorBeat)
	h.renew(ctx)
	cancel()
	q.mu.Lock()
	at, ok := q.sent["m"]
	q.mu.Unlock()
	if !ok || at.After(until) {
		t.Fatalf("m's renewal sent %v after its visibility lapsed (sent: %v); want before", at.Sub(until), ok)
	}
}
