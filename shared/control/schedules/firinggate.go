package schedules

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Firing bursts. A thousand schedules due in the same second reach their
// consumers together (timers.go: each waits out its time), and each
// firing then makes a dozen requests: the job's write, its root stage's
// start and materialization, the run record, the cursor. Left to run
// all at once, every firing's job write queues behind the other firings'
// follow-up requests (and a thousand connections open at once), and the
// last job of the burst is written only when nearly all of the burst's
// work is done: 19 s on DynamoDB Local on two cores.
//
// The gate puts the burst's job writes first: a firing that reached its
// time takes one of firingWriters slots for its job write, and its
// follow-up work waits until no firing of this process is still waiting
// to write its job (at most firingHold), then runs with at most
// firingFollowers others at once. Nothing about a firing's guarantees
// changes: the same steps run in the same order for each firing, only
// later; a firing whose process dies between its job write and its
// follow-up is finished by the job's own sweep item (the root stage is
// due StartGrace after the job's creation) and by the sweep's firing
// (the cursor did not move, so the next firer finds the job by its
// idempotency key and records the run and the cursor).
const (
	// firingWriters bounds concurrent job writes of a burst: enough to
	// keep the table busy, few enough not to open a connection each.
	firingWriters = 32
	// firingFollowers bounds the concurrent follow-up work of fired jobs.
	firingFollowers = 16
	// firingHold bounds how long a written firing's follow-up waits for
	// the rest of the burst's job writes.
	firingHold = 10 * time.Second
)

type firingGate struct {
	writers, followers chan struct{}
	pending            atomic.Int64 // firings at their time whose job is not written yet
}

func newFiringGate() *firingGate {
	return &firingGate{writers: make(chan struct{}, firingWriters), followers: make(chan struct{}, firingFollowers)}
}

// firingTurn is one firing's passage through the gate.
type firingTurn struct {
	g       *firingGate
	mu      sync.Mutex
	stage   int // 0: waiting to write, 1: writing, 2: written (waiting or following), 3: done
	holding chan struct{}
}

type firingTurnKey struct{}

// enterFiring registers a firing that reached its time and waits for a
// writer slot; done must be called when the firing's handling ends.
func (s *Firer) enterFiring(ctx context.Context) (context.Context, *firingTurn, error) {
	t := s.arriveFiring()
	ctx, err := t.awaitWriter(ctx)
	return ctx, t, err
}

// arriveFiring registers a firing that reached its time: from here on,
// written firings' follow-ups wait for its job write. The gate orders
// only the firings registered so far; one that registers later (its
// goroutine scheduled late) may find follow-ups already running.
func (s *Firer) arriveFiring() *firingTurn {
	g := s.gate
	g.pending.Add(1)
	return &firingTurn{g: g}
}

// awaitWriter waits for a writer slot for an arrived firing.
func (t *firingTurn) awaitWriter(ctx context.Context) (context.Context, error) {
	select {
	case t.g.writers <- struct{}{}:
	case <-ctx.Done():
		t.mu.Lock()
		t.g.pending.Add(-1)
		t.stage = 3
		t.mu.Unlock()
		return ctx, ctx.Err()
	}
	t.mu.Lock()
	t.stage, t.holding = 1, t.g.writers
	t.mu.Unlock()
	return context.WithValue(ctx, firingTurnKey{}, t), nil
}

// JobWritten is called by control's submit once a firing's job is
// written (or found written): the writer slot goes to the next firing,
// and the follow-up waits its turn. Outside a gated firing it does nothing.
func JobWritten(ctx context.Context) {
	t, ok := ctx.Value(firingTurnKey{}).(*firingTurn)
	if !ok {
		return
	}
	t.mu.Lock()
	if t.stage != 1 {
		t.mu.Unlock()
		return // a catch-up's second job, or already done
	}
	t.stage = 2
	<-t.holding
	t.holding = nil
	t.g.pending.Add(-1)
	t.mu.Unlock()
	held := time.Now()
	for t.g.pending.Load() > 0 && time.Since(held) < firingHold && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case t.g.followers <- struct{}{}:
		t.mu.Lock()
		t.holding = t.g.followers
		t.mu.Unlock()
	case <-ctx.Done():
	}
}

// done ends the firing's turn, releasing what it holds.
func (t *firingTurn) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stage < 2 {
		t.g.pending.Add(-1)
	}
	if t.holding != nil {
		<-t.holding
		t.holding = nil
	}
	t.stage = 3
}
