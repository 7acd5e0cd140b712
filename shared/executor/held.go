package executor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// heldMessages are the messages of the tasks an executor runs, which it
// keeps hidden tuning.HeldVisibility at a time, beside its liveness record
// (see control.ExecutorAlive). Two loops, so a slow SQS never delays the
// liveness record, and a slow DynamoDB never lets messages lapse.
type heldMessages struct {
	q   Queue
	log *slog.Logger

	mu    sync.Mutex // guards byURL
	byURL map[string]map[string]bool
	// renewing is held across a renewal's requests. A message that leaves
	// the set is hidden for its own delay only after the renewal in
	// flight, so no renewal lands after the hide and brings it back early;
	// no request is made under mu.
	renewing sync.Mutex
	renewNow chan struct{}
}

func newHeldMessages(q Queue, log *slog.Logger) *heldMessages {
	return &heldMessages{q: q, log: log, byURL: map[string]map[string]bool{}, renewNow: make(chan struct{}, 1)}
}

func (h *heldMessages) add(m queue.Message) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byURL[m.Queue] == nil {
		h.byURL[m.Queue] = map[string]bool{}
	}
	h.byURL[m.Queue][m.Receipt] = true
}

// remove takes m out of the set, then runs then (its hide or nothing)
// after any renewal in flight.
func (h *heldMessages) remove(m queue.Message, then func()) {
	h.mu.Lock()
	delete(h.byURL[m.Queue], m.Receipt)
	h.mu.Unlock()
	h.renewing.Lock()
	defer h.renewing.Unlock()
	then()
}

// start runs the liveness and visibility loops until the returned stop.
// A renewal follows each beat, so a message never comes back before its
// dead holder's promise has lapsed (tuning.HeldVisibility covers the
// promise and the skew): the first executor to receive it can take it
// over at once, instead of bouncing it for another round.
func (h *heldMessages) start(ctx context.Context, live Liveness, id string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		every(ctx, tuning.ExecutorBeat, func(ctx context.Context) {
			if err := live.ExecutorAlive(ctx, id); err != nil {
				h.log.Warn("executor liveness", "executor", id, "err", err)
			}
			h.kick()
		})
	}()
	go func() {
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.renewNow:
			}
			rctx, cancel := context.WithTimeout(ctx, tuning.ExecutorLease-tuning.ExecutorBeat)
			h.renew(rctx)
			cancel()
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// hold adds the message of a task just claimed and hides it for the held
// visibility at once, before the task starts: the short receive
// visibility must not lapse under a live claim, or the message comes back
// while its holder looks well and waits out the task's lease. No hide of
// its own can race this one: its task has not run.
func (h *heldMessages) hold(ctx context.Context, m queue.Message) {
	h.add(m)
	ctx, cancel := context.WithTimeout(ctx, tuning.ReceiveVisibility)
	defer cancel()
	if err := h.q.ChangeVisibility(ctx, m.Queue, m.Receipt, tuning.HeldVisibility); err != nil {
		h.log.Warn("hide a claimed task's message", "task", m.Body, "err", err)
	}
}

// kick asks for a renewal of every held message now (after a beat).
// Kicks while a renewal runs fold into one more.
func (h *heldMessages) kick() {
	select {
	case h.renewNow <- struct{}{}:
	default:
	}
}

// every runs f each period until ctx ends, each run bounded so that a
// stuck request gives way to the next beat. A late beat is not made up:
// the promise and the visibility outlast one or two.
func every(ctx context.Context, period time.Duration, f func(context.Context)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fctx, cancel := context.WithTimeout(ctx, tuning.ExecutorLease-period)
		f(fctx)
		cancel()
	}
}

func (h *heldMessages) renew(ctx context.Context) {
	h.renewing.Lock()
	defer h.renewing.Unlock()
	h.mu.Lock()
	snapshot := make(map[string][]string, len(h.byURL))
	for url, set := range h.byURL {
		for r := range set {
			snapshot[url] = append(snapshot[url], r)
		}
	}
	h.mu.Unlock()
	for url, receipts := range snapshot {
		gone, err := h.q.ChangeVisibilityBatch(ctx, url, receipts, tuning.HeldVisibility)
		if err != nil {
			h.log.Warn("keep messages hidden", "queue", url, "err", err)
		}
		if len(gone) > 0 {
			// Their messages were received again elsewhere (or deleted):
			// these receipts can never renew again.
			h.log.Debug("held messages gone", "queue", url, "count", len(gone))
			h.mu.Lock()
			for _, r := range gone {
				delete(h.byURL[url], r)
			}
			h.mu.Unlock()
		}
	}
}

// aliveBeforeWork writes the executor's first liveness record, trying
// until it succeeds or ctx ends (false).
func aliveBeforeWork(ctx context.Context, live Liveness, id string, log *slog.Logger) bool {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := live.ExecutorAlive(ctx, id)
		if err == nil {
			return true
		}
		log.Warn("executor liveness: first record", "executor", id, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-time.After(wait):
		}
	}
}
