package feed

import (
	"context"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// aheadWait bounds how long a message received ahead waits for a slot
// before it goes back to the queue: behind short tasks it waits a small
// part of aheadTask; longer means the slots filled with long tasks, and
// another executor may be idle.
const aheadWait = time.Second

// expireAhead gives back, every aheadWait/2 until the returned stop, the
// messages that have waited for a slot aheadWait or more, and ends the
// receive-ahead until tasks are short again.
func (p *Poller) expireAhead(ctx context.Context, arb *arbiter, pool *workers, give func([]queue.Message)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every(ctx, aheadWait/2, func(context.Context) { // held.go
			stale := pool.takeWaiting(time.Now().Add(-aheadWait))
			if len(stale) == 0 {
				return
			}
			arb.slow()
			p.Log.Info("receive-ahead: messages waited too long for a slot; giving them back", "count", len(stale))
			give(stale)
		})
	}()
	return func() { cancel(); wg.Wait() }
}

// giveBack makes messages received but not run visible again at once,
// so another executor (or this one) runs them without waiting out their
// visibility: one request per ten of a queue. Their tasks were never
// claimed here.
func (p *Poller) giveBack(ms []queue.Message, held *heldMessages) {
	show := func() {
		byURL := map[string][]string{}
		for _, m := range ms {
			byURL[m.Queue] = append(byURL[m.Queue], m.Receipt)
		}
		for url, receipts := range byURL {
			ctx, cancel := context.WithTimeout(context.Background(), lockedHide)
			if _, err := p.Queue.ChangeVisibilityBatch(ctx, url, receipts, 0); err != nil {
				p.Log.Warn("give messages back", "queue", url, "count", len(receipts), "err", err)
			}
			cancel()
		}
	}
	if held != nil {
		held.remove(show, ms...) // no renewal lands after it
		return
	}
	show()
}
