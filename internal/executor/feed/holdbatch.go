package feed

import (
	"context"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// holdLinger bounds how long a just-claimed message waits for others to
// share its hide (one ChangeMessageVisibilityBatch for up to ten, instead
// of a ChangeMessageVisibility each: a request per task saved under load).
// Short beside what is left of the visibility of a message it hides
// (renewSlack): the beat's renewal covers it too.
const holdLinger = 100 * time.Millisecond

// maxHideBatch is SQS's limit on one ChangeMessageVisibilityBatch.
const maxHideBatch = 10

// hideBatches are the receipts waiting for their hold's hide, by queue.
type hideBatches struct {
	mu      sync.Mutex
	pending map[string][]string
}

// hideSoon queues m's hide: it is sent with the other messages of its
// queue claimed within holdLinger, or at once with the tenth.
func (h *heldMessages) hideSoon(m queue.Message) {
	b := &h.hides
	b.mu.Lock()
	if b.pending == nil {
		b.pending = map[string][]string{}
	}
	first := len(b.pending[m.Queue]) == 0
	b.pending[m.Queue] = append(b.pending[m.Queue], m.Receipt)
	full := len(b.pending[m.Queue]) >= maxHideBatch
	b.mu.Unlock()
	switch {
	case full:
		go h.flushHides(m.Queue)
	case first:
		time.AfterFunc(holdLinger, func() { h.flushHides(m.Queue) })
	}
}

// flushHides hides the queue's pending messages that are still held as
// claimed. It runs under the renewal lock, like a renewal: a message whose
// task ended meanwhile left the set before its own hide (remove), so it
// is skipped here, and one still held is hidden before any own hide of
// its task can be sent.
func (h *heldMessages) flushHides(url string) {
	b := &h.hides
	b.mu.Lock()
	receipts := b.pending[url]
	delete(b.pending, url)
	b.mu.Unlock()
	if len(receipts) == 0 {
		return // a full batch took them
	}
	h.renewing.Lock()
	defer h.renewing.Unlock()
	h.mu.Lock()
	live := receipts[:0]
	for _, r := range receipts {
		if h.byURL[url][r].claimed {
			live = append(live, r)
		}
	}
	h.mu.Unlock()
	for lo := 0; lo < len(live); lo += maxHideBatch {
		batch := live[lo:min(lo+maxHideBatch, len(live))]
		ctx, cancel := context.WithTimeout(context.Background(), lockedHide)
		start := time.Now()
		gone, err := h.q.ChangeVisibilityBatch(ctx, url, batch, tuning.HeldVisibility)
		cancel()
		if err != nil {
			h.log.Warn("hide claimed tasks' messages", "queue", url, "count", len(batch), "err", err)
		} else {
			h.hidden(url, batch, start, tuning.HeldVisibility)
		}
		if len(gone) > 0 {
			h.mu.Lock()
			for _, r := range gone {
				delete(h.byURL[url], r)
			}
			h.mu.Unlock()
		}
	}
}
