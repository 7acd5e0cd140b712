package feed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// Poller is the long-running host: Slots concurrent tasks fed by long
// polling the ready queues. It receives as many messages as it has free
// slots, and, with a liveness record, up to one batch more while a queue
// is backlogged and its tasks are short (arbiter.withAhead, ahead.go): a
// slot that frees then starts its next task at once instead of waiting
// for a receive. A message received ahead waits at most aheadWait for a
// slot, renewed like any held message, and goes back to the queue
// unclaimed if it waits longer or the executor stops.
type Poller struct {
	// Handler runs each received task (executor.Runner).
	Handler Handler
	// CP keeps the executor's liveness record and writes batched counts.
	CP    ControlPlane
	Queue Queue
	// Queues are polled each by their own receiver, highest priority
	// first. Free slots go to the waiting receivers by weighted fairness
	// (see arbiter), so a backlogged high queue runs first and a
	// backlogged low queue still progresses.
	Queues []string
	// Weights are the queues' shares of slots under contention, parallel
	// to Queues. Default 6:3:1 for three queues, equal otherwise.
	Weights    []int
	Slots      int
	Wait       time.Duration // long-poll wait, default tuning.ReceiveWait
	Visibility time.Duration // initial visibility before a claim sets the lease, default tuning.ReceiveVisibility
	// Drain bounds how long Run waits for running tasks after ctx ends.
	Drain time.Duration
	Log   *slog.Logger
	// Activity, if set, hears each slot start and end a task (the
	// Fargate host's scale-in protection: internal/host/protection.go).
	// Its methods must not block.
	Activity Activity
	// ExecutorID, when set, is the executor's id (a Fargate task's, from
	// its ARN: host/ecsid.go); else one is made up.
	ExecutorID string
}

// Run polls until ctx is cancelled (SIGTERM), then stops receiving, lets
// running tasks finish for up to Drain, deletes what they finished, and
// returns.
func (p *Poller) Run(ctx context.Context) error {
	slots := max(p.Slots, 1)
	wait, vis := p.Wait, p.Visibility
	if wait == 0 {
		wait = tuning.ReceiveWait
	}
	if vis == 0 {
		vis = tuning.ReceiveVisibility
	}
	drain := p.Drain
	if drain == 0 {
		drain = 2 * time.Minute
	}
	// Tasks run on a context that outlives ctx by the drain period, so a
	// SIGTERM lets them finish and commit.
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()
	// With a liveness record, the poller keeps its running tasks' messages
	// hidden only seconds at a time, and a dead poller's tasks are taken
	// over within seconds instead of a lease.
	var held *heldMessages
	id := p.ExecutorID
	if id == "" {
		id = control.NewExecutorID()
	}
	// Alive before the first claim, so no claim of ours looks dead:
	// nothing is received until the record is written.
	alive, err := aliveBeforeWork(ctx, p.CP, id, p.Log)
	if err != nil {
		return nil // stopped before any work
	}
	if alive {
		taskCtx = control.WithExecutor(taskCtx, id)
		held = newHeldMessages(p.Queue, p.Log)
		stop := held.start(context.WithoutCancel(ctx), p.CP, id)
		defer stop()
		p.Log.Info("executor liveness on", "executor", id)
	}
	del := newDeleter(p.Queue, p.Log, countFlush(p.CP, p.Log), deleteLinger)
	var running sync.WaitGroup
	var receivers sync.WaitGroup
	// An idle receiver long-polls holding one slot, so every class has a
	// poll in flight and an idle executor picks up any message at once; a
	// backlogged one asks for a batch. With fewer slots than queues, not
	// every receiver can hold one: the idle polls are then short, so the
	// slots pass from queue to queue (by the arbiter's weights) within
	// about idleWaitShared, and no queue waits behind another's long poll.
	if slots < len(p.Queues) {
		wait = min(wait, idleWaitShared)
	}
	batch := min(10, slots)
	arb := newArbiter(slots, batch, p.weights())
	// give back hands a message received but never run to the queue at
	// once (SIGTERM, or a receive-ahead that waited too long).
	give := func(ms []queue.Message) {
		p.giveBack(ms, held)
		for range ms {
			if p.Activity != nil {
				p.Activity.TaskEnded()
			}
			arb.release(1)
			running.Done()
		}
	}
	pool := newWorkers(slots, func(m queue.Message) { // workers.go
		if ctx.Err() != nil {
			give([]queue.Message{m}) // received as the executor stopped: another runs it
			return
		}
		defer running.Done()
		if p.Activity != nil {
			defer p.Activity.TaskEnded()
		}
		start := time.Now()
		defer func() { arb.done(time.Since(start)) }() // deferred: a task may end its goroutine
		p.handle(taskCtx, m, vis, del, held)
	})
	if held != nil {
		// Only with liveness: a message received ahead is then renewed
		// while it waits, like any message received and not yet claimed.
		arb.withAhead(batch, slots)
		stop := p.expireAhead(ctx, arb, pool, give)
		defer stop()
	}
	for i, url := range p.Queues {
		receivers.Add(1)
		go func() {
			defer receivers.Done()
			limit, backlogged := 1, false
			for ctx.Err() == nil {
				n, err := arb.acquire(ctx, i, limit)
				if err != nil {
					return
				}
				if backlogged {
					n = gatherSlots(ctx, arb, i, n, limit) // receivebatch.go
				}
				// While backlogged, poll without waiting: slots may be held
				// for this receiver, and they must not sit through a long
				// poll if the queue has just emptied. The next receive after
				// an empty or short one long-polls again.
				w := wait
				if backlogged {
					w = 0
				}
				// An idle receiver's message came with the slot its long
				// poll held: it runs on the next slot to free, not behind
				// the messages received ahead (a backlogged class's).
				idle := !backlogged
				start := time.Now() // the messages are hidden until at least start+vis
				msgs, err := p.Queue.Receive(ctx, url, n, w, vis)
				backlogged = err == nil && len(msgs) == n
				arb.received(i, n, len(msgs))
				// A backlog asks for a full batch (the arbiter still grants
				// by weight); otherwise hold one slot while long polling.
				limit = 1
				if backlogged {
					limit = batch
				}
				if err != nil {
					if ctx.Err() == nil {
						p.Log.Warn("receive", "queue", url, "err", err)
						time.Sleep(time.Second)
					}
					continue
				}
				for _, m := range msgs {
					p.Log.Debug("task message received", "task", m.Body, "message", m.ID, "receives", m.ReceiveCount)
					if held != nil {
						held.received(m, start.Add(vis))
					}
				}
				for _, m := range msgs {
					running.Add(1)
					if p.Activity != nil {
						p.Activity.TaskStarted()
					}
					if idle {
						pool.startFirst(m)
					} else {
						pool.start(m)
					}
				}
			}
		}()
	}
	receivers.Wait()
	if waiting := pool.takeWaiting(time.Now()); len(waiting) > 0 {
		give(waiting) // none starts after SIGTERM
	}
	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		p.Log.Warn("drain timed out; abandoning running tasks (their leases expire)")
		cancelTasks()
		<-done
	}
	pool.close()
	del.close()
	return nil
}

func (p *Poller) handle(ctx context.Context, m queue.Message, vis time.Duration, del *deleter, held *heldMessages) {
	extend := func(ctx context.Context, d time.Duration) error {
		return p.Queue.ChangeVisibility(ctx, m.Queue, m.Receipt, d)
	}
	var res Result
	if held != nil {
		// The beat keeps the message hidden while the task runs, so the
		// runner must not set it to the lease. It is held from its claim
		// on, not from its receipt: a message this executor dies holding
		// unclaimed comes back after the short receive visibility.
		claimed := func(ctx context.Context) { held.hold(ctx, m) }
		ended := true
		defer func() {
			if ended {
				// The task ended its goroutine: no renewal keeps its
				// message hidden for ever, so it comes back (its attempt
				// failed: Runner.run).
				held.remove(func() {}, m)
			}
		}()
		res = p.Handler.Handle(ctx, Delivery{Body: m.Body, SentAt: m.SentAt, Trace: m.Trace, Visibility: vis, Claimed: claimed}, nil)
		ended = false
	} else {
		res = p.Handler.Handle(ctx, Delivery{Body: m.Body, SentAt: m.SentAt, Trace: m.Trace, Visibility: vis}, extend)
	}
	hide := func() {
		if res.Action == Hide {
			// Bounded (lockedHide): the held messages' renewals wait
			// for it. A hide that fails lets the message back early,
			// where its claim answers not due or held.
			bound := tuning.ExecutorLease - tuning.ExecutorBeat
			if held != nil {
				bound = lockedHide
			}
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			if err := extend(ctx, res.Delay); err != nil {
				p.Log.Warn("hide message", "task", m.Body, "err", err)
			}
		}
	}
	if held != nil {
		// Out of the beat's set before the hide, so no renewal lands after
		// it and brings the message back early.
		held.remove(hide, m)
	} else {
		hide()
	}
	if res.Action == Delete {
		del.add(m.Queue, m.Receipt)
	}
	p.Log.Debug("task message handled", "task", m.Body, "message", m.ID, "action", res.Action.String(), "delay", res.Delay, "err", res.Err)
}

// idleWaitShared is the long-poll wait when slots are fewer than queues.
const idleWaitShared = time.Second

// deleteLinger is how often finished tasks' messages are deleted: their
// batched counts are written first (countFlush), all of them in one write
// per counter shard, then the messages, ten per request. Deleting a full
// ten at once would cost a count write each time (the count of a task
// must be written before its message goes), so deletes wait for the
// tick: at a few hundred tasks a second, one count write per shard covers
// dozens of tasks instead of ten. A late delete is harmless: the task is
// already SUCCEEDED, so a redelivery is dropped at its claim (and its
// message, hidden from its receive or last renewal, outlasts two ticks
// and a round's own requests: TestDeleteRoundsFitTheHeldVisibility; a
// message that lapses first comes back to another executor, whose claim
// is refused and counts the task). A round's tasks fall on about two
// counter shards whatever its length, so a longer round is fewer count
// writes, for up to a round more before a stage's last count and its
// completion; 300 ms leaves the visibility a margin of about 200 ms.
const deleteLinger = tuning.DeleteRound

// deleter batches message deletes, ten per request, every linger, after
// the counts of their tasks. A round's last part batch waits one more
// round to fill its ten, then goes whatever its size.
//
// A finished task's receipt goes into pending under a lock, not over a
// channel: a send would wake the loop's goroutine once a task (and, on an
// idle process, another thread to run it) only to append it, while the
// loop reads them at its tick.
type deleter struct {
	q      Queue
	log    *slog.Logger
	before func() bool
	linger time.Duration
	mu     sync.Mutex
	in     map[string][]string // receipts added since the last round, by queue
	quit   chan struct{}
	done   chan struct{}
}

// newDeleter deletes finished messages every linger; before is called
// before each round (countFlush: a message goes only once its task's
// count is written).
func newDeleter(q Queue, log *slog.Logger, before func() bool, linger time.Duration) *deleter {
	d := &deleter{q: q, log: log, before: before, linger: linger, in: map[string][]string{}, quit: make(chan struct{}), done: make(chan struct{})}
	go d.loop()
	return d
}

func (d *deleter) add(url, receipt string) {
	d.mu.Lock()
	d.in[url] = append(d.in[url], receipt)
	d.mu.Unlock()
}

// close deletes what is left, after every add has returned.
func (d *deleter) close() { close(d.quit); <-d.done }

func (d *deleter) loop() {
	defer close(d.done)
	r := &deleteRounds{d: d, pending: map[string][]string{}, carried: map[string][]string{}}
	tick := time.NewTicker(d.linger)
	defer tick.Stop()
	for {
		final := false
		select {
		case <-d.quit:
			final = true
		case <-tick.C:
		}
		// Taken before the round's before(): every receipt in it was
		// added after its task's count was handed to the batcher that
		// before() flushes.
		d.mu.Lock()
		r.pending, d.in = d.in, r.pending
		d.mu.Unlock()
		r.round(final)
		if final {
			return
		}
	}
}

// deleteRounds is the deleter loop's state: pending are the receipts
// handed in since the last round, by queue; carried are a round's last
// part batch per queue, whose counts are written, kept for one more round
// to fill its ten.
type deleteRounds struct {
	d                *deleter
	pending, carried map[string][]string
}

// round writes the pending receipts' counts, then deletes every full ten
// of each queue, and its part batch too when some of it waited a round
// already or when final.
func (r *deleteRounds) round(final bool) {
	if len(r.pending) > 0 && !r.d.before() {
		clear(r.pending) // they come back, and their claims count them
	}
	waited := make(map[string]int, len(r.carried))
	for url, rs := range r.carried {
		waited[url] = len(rs)
	}
	for url, rs := range r.pending {
		r.carried[url] = append(r.carried[url], rs...)
	}
	clear(r.pending)
	for url, rs := range r.carried {
		n := len(rs) / 10 * 10
		if final || n < waited[url] {
			n = len(rs) // some waited a round already: none waits longer
		}
		if n > 0 {
			if err := r.d.q.DeleteBatch(context.Background(), url, rs[:n]); err != nil {
				r.d.log.Warn("delete messages", "err", err)
			}
		}
		if n == len(rs) {
			delete(r.carried, url)
		} else {
			r.carried[url] = rs[n:]
		}
	}
}
