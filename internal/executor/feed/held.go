package feed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// heldMessages are the messages an executor holds, beside its liveness
// record (see control.ExecutorAlive): those of the tasks it runs, kept
// hidden tuning.HeldVisibility at a time, and those it received and is
// still claiming, kept hidden tuning.UnclaimedVisibility at a time (a slow
// claim must not let its message go to another executor, which would
// judge the fresh holder alive and hide the message for a whole lease).
// Two loops, so a slow SQS never delays the liveness record, and a slow
// DynamoDB never lets messages lapse.
type heldMessages struct {
	q   Queue
	log *slog.Logger

	mu sync.Mutex // guards byURL
	// byURL maps each queue's receipts to their hold.
	byURL map[string]map[string]hold
	// renewing is held across a renewal's requests. A message that leaves
	// the set is hidden for its own delay only after the renewal in
	// flight, so no renewal lands after the hide and brings it back early;
	// no request is made under mu.
	renewing sync.Mutex
	// renewNow carries each beat's done channel to the renewal loop.
	renewNow chan chan struct{}
	// hides are the just-claimed messages waiting to be hidden together
	// (holdbatch.go).
	hides hideBatches
}

// hold is a held message's state.
type hold struct {
	// claimed: its task is claimed (else its claim is pending).
	claimed bool
	// hiddenUntil is the earliest the message can become visible, as far
	// as this executor knows (a receive's or renewal's start plus the
	// visibility it asked for); zero when unknown (a Lambda batch's
	// message, which came with the queue's long visibility that the first
	// renewal shortens).
	hiddenUntil time.Time
}

func newHeldMessages(q Queue, log *slog.Logger) *heldMessages {
	return &heldMessages{q: q, log: log, byURL: map[string]map[string]hold{}, renewNow: make(chan chan struct{}, 1)}
}

// add holds the message of a task being run, renewed from the next beat
// on.
func (h *heldMessages) add(m queue.Message) { h.set(m, hold{claimed: true}) }

// received holds a message whose task is not claimed yet, hidden until
// hiddenUntil by its receive.
func (h *heldMessages) received(m queue.Message, hiddenUntil time.Time) {
	h.set(m, hold{hiddenUntil: hiddenUntil})
}

func (h *heldMessages) set(m queue.Message, e hold) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byURL[m.Queue] == nil {
		h.byURL[m.Queue] = map[string]hold{}
	}
	h.byURL[m.Queue][m.Receipt] = e
}

// claim marks a received message's task claimed and reports whether its
// visibility is near its end (or unknown): within renewSlack.
func (h *heldMessages) claim(m queue.Message) (near bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byURL[m.Queue] == nil {
		h.byURL[m.Queue] = map[string]hold{}
	}
	e := h.byURL[m.Queue][m.Receipt]
	e.claimed = true
	h.byURL[m.Queue][m.Receipt] = e
	return due(e, time.Now())
}

// renewSlack is how much visibility a held message must have left for a
// renewal to pass it over: more than the longest gap to the next renewal
// (a beat stuck on DynamoDB until its bound, ExecutorLease-ExecutorBeat,
// then renewAfterBeat, plus the request's own time: renewGap) and the
// longest the renewal lock can be held by a hide in between (lockedHide):
// a renewal that passed a message over must not be followed by one that
// waits for a hung hide until the message lapsed. A message received with
// tuning.ReceiveVisibility (2 s) is passed over by the renewals of its
// first quarter second, so a short task's message is never hidden again:
// its receive is its first hide.
const renewSlack = renewGap + lockedHide

// renewGap is the longest gap to the next renewal's request, the request
// included.
const renewGap = 1500 * time.Millisecond

// lockedHide bounds each hide sent under the renewal lock (a claim's,
// flushHides; a task's own, remove). A hide cut short is harmless: a
// claim's stays due, so the next renewal sends it; a task's own lets the
// message back early, where its claim answers not due or held.
const lockedHide = 250 * time.Millisecond

// due reports whether a renewal at now must renew e: its visibility
// could lapse before the next renewal lands, or is unknown.
func due(e hold, now time.Time) bool {
	return e.hiddenUntil.IsZero() || e.hiddenUntil.Before(now.Add(renewSlack))
}

// hidden records that the receipts of url were hidden for vis by a
// request that started at start, unless they left the set or were gone.
func (h *heldMessages) hidden(url string, receipts []string, start time.Time, vis time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range receipts {
		if e, ok := h.byURL[url][r]; ok {
			e.hiddenUntil = start.Add(vis)
			h.byURL[url][r] = e
		}
	}
}

// claimedReceipts are the receipt handles of the messages whose task is
// claimed.
func (h *heldMessages) claimedReceipts() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, rs := range h.byURL {
		for r, e := range rs {
			if e.claimed {
				out = append(out, r)
			}
		}
	}
	return out
}

// remove takes ms out of the set, then runs then (their hide or nothing)
// after any renewal in flight. then must be bounded: renewals wait for it.
func (h *heldMessages) remove(then func(), ms ...queue.Message) {
	h.mu.Lock()
	for _, m := range ms {
		delete(h.byURL[m.Queue], m.Receipt)
	}
	h.mu.Unlock()
	h.renewing.Lock()
	defer h.renewing.Unlock()
	then()
}

// start runs the liveness and visibility loops until the returned stop.
// Each beat starts a renewal, which waits for the beat to land (at most
// renewAfterBeat), so a dead holder's message comes back only once its
// promise has lapsed (tuning.HeldVisibility covers the promise and the
// skew) and the first executor to receive it can take it over, instead of
// bouncing it for another round; and a beat stuck on DynamoDB delays the
// renewal by renewAfterBeat at most, never lets messages lapse.
func (h *heldMessages) start(ctx context.Context, live Liveness, id string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	beat := beatFunc(ctx, live, id) // memreport.go: with the executor's memory
	go func() {
		defer wg.Done()
		every(ctx, tuning.ExecutorBeat, func(ctx context.Context) {
			landed := make(chan struct{})
			h.kick(landed)
			defer close(landed)
			// The beat's cost is the held tasks' (shared/cost/meter).
			if err := beat(meter.WithReceipts(ctx, h.claimedReceipts())); err != nil {
				h.log.Warn("executor liveness", "executor", id, "err", err)
			}
		})
	}()
	go func() {
		defer wg.Done()
		for {
			var landed chan struct{}
			select {
			case <-ctx.Done():
				return
			case landed = <-h.renewNow:
			}
			select {
			case <-ctx.Done():
				return
			case <-landed:
			case <-time.After(renewAfterBeat):
			}
			rctx, cancel := context.WithTimeout(ctx, tuning.ExecutorLease-tuning.ExecutorBeat)
			h.renew(rctx)
			cancel()
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// renewAfterBeat bounds how long a renewal waits for its beat to land.
const renewAfterBeat = 200 * time.Millisecond

// hold marks the message of a task just claimed. Its receive hid it for
// tuning.ReceiveVisibility, the held visibility, so the beat's renewals
// keep it hidden from when it nears its end: a task that ends within it
// costs no visibility change. One whose claim was slow and whose
// visibility is near its end is hidden within holdLinger instead of at
// the next beat: it must not lapse under a live claim, or the message
// comes back while its holder looks well and waits out the task's lease.
// The hides of messages claimed together go in one request
// (holdbatch.go).
func (h *heldMessages) hold(ctx context.Context, m queue.Message) {
	if h.claim(m) {
		h.hideSoon(m)
	}
}

// kick asks for a renewal of every held message once landed is closed
// (the beat landed). Kicks while a renewal waits fold into it.
func (h *heldMessages) kick(landed chan struct{}) {
	select {
	case h.renewNow <- landed:
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
	type batch struct {
		url string
		vis time.Duration
	}
	now := time.Now()
	h.mu.Lock()
	snapshot := make(map[batch][]string, len(h.byURL))
	for url, set := range h.byURL {
		for r, e := range set {
			if !due(e, now) {
				continue // hidden past the next renewal
			}
			b := batch{url, tuning.UnclaimedVisibility}
			if e.claimed {
				b.vis = tuning.HeldVisibility
			}
			snapshot[b] = append(snapshot[b], r)
		}
	}
	h.mu.Unlock()
	for b, receipts := range snapshot {
		url := b.url
		start := time.Now()
		gone, err := h.q.ChangeVisibilityBatch(ctx, url, receipts, b.vis)
		if err != nil {
			h.log.Warn("keep messages hidden", "queue", url, "err", err)
		} else {
			h.hidden(url, receipts, start, b.vis)
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
// until it succeeds (true) or ctx ends (its error). False without an error:
// the control plane keeps no liveness records (ErrUnsupported), and the
// executor runs without one.
func aliveBeforeWork(ctx context.Context, live Liveness, id string, log *slog.Logger) (bool, error) {
	for wait := 100 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := live.ExecutorAlive(ctx, id)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, ErrUnsupported):
			return false, nil
		}
		log.Warn("executor liveness: first record", "executor", id, "err", err)
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(wait):
		}
	}
}
