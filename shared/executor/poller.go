package executor

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/queue"
)

// Queue is what the hosts need of SQS.
type Queue interface {
	Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error)
	ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error
	DeleteBatch(ctx context.Context, url string, receipts []string) error
}

// Poller is the long-running host: Slots concurrent tasks fed by long
// polling the ready queues. It receives only as many messages as it has
// free slots, so no message waits in this process while its lease runs.
type Poller struct {
	Runner *Runner
	Queue  Queue
	// Queues are polled each by their own receiver; see issue on weighted
	// priorities for fairness between classes.
	Queues     []string
	Slots      int
	Wait       time.Duration // long-poll wait, default 20s
	Visibility time.Duration // initial visibility before a claim sets the lease, default 60s
	// Drain bounds how long Run waits for running tasks after ctx ends.
	Drain time.Duration
	Log   *slog.Logger
}

// Run polls until ctx is cancelled (SIGTERM), then stops receiving, lets
// running tasks finish for up to Drain, deletes what they finished, and
// returns.
func (p *Poller) Run(ctx context.Context) error {
	slots := make(chan struct{}, max(p.Slots, 1))
	wait, vis := p.Wait, p.Visibility
	if wait == 0 {
		wait = 20 * time.Second
	}
	if vis == 0 {
		vis = 60 * time.Second
	}
	drain := p.Drain
	if drain == 0 {
		drain = 2 * time.Minute
	}
	// Tasks run on a context that outlives ctx by the drain period, so a
	// SIGTERM lets them finish and commit.
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()
	del := newDeleter(p.Queue, p.Log)
	var running sync.WaitGroup
	var receivers sync.WaitGroup
	// Each receiver holds at most its share of the slots while it waits, so
	// one queue's long poll never starves another queue of slots.
	share := max(1, min(10, cap(slots)/max(len(p.Queues), 1)))
	for _, url := range p.Queues {
		receivers.Add(1)
		go func() {
			defer receivers.Done()
			backlog := false
			for ctx.Err() == nil {
				// Take one slot (blocking), then any more that are free. With
				// a backlog (the last receive came back full), wait a moment
				// for more slots to free up, so one request fetches several
				// messages; an idle executor never waits here.
				select {
				case slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				n := 1 + takeSlots(ctx, slots, share-1, backlog)
				msgs, err := p.Queue.Receive(ctx, url, n, wait, vis)
				backlog = err == nil && len(msgs) == n
				for range n - len(msgs) {
					<-slots
				}
				if err != nil {
					if ctx.Err() == nil {
						p.Log.Warn("receive", "queue", url, "err", err)
						time.Sleep(time.Second)
					}
					continue
				}
				for _, m := range msgs {
					running.Add(1)
					go func() {
						defer running.Done()
						defer func() { <-slots }()
						p.handle(taskCtx, m, vis, del)
					}()
				}
			}
		}()
	}
	receivers.Wait()
	done := make(chan struct{})
	go func() { running.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drain):
		p.Log.Warn("drain timed out; abandoning running tasks (their leases expire)")
		cancelTasks()
		<-done
	}
	del.close()
	return nil
}

// takeSlots takes up to n more free slots without blocking, or, with
// linger, waiting up to batchLinger for them.
func takeSlots(ctx context.Context, slots chan struct{}, n int, linger bool) int {
	var timeout <-chan time.Time
	if linger {
		t := time.NewTimer(batchLinger)
		defer t.Stop()
		timeout = t.C
	}
	got := 0
	for got < n {
		if !linger {
			select {
			case slots <- struct{}{}:
				got++
				continue
			default:
				return got
			}
		}
		select {
		case slots <- struct{}{}:
			got++
		case <-timeout:
			return got
		case <-ctx.Done():
			return got
		}
	}
	return got
}

func (p *Poller) handle(ctx context.Context, m queue.Message, vis time.Duration, del *deleter) {
	extend := func(ctx context.Context, d time.Duration) error {
		return p.Queue.ChangeVisibility(ctx, m.Queue, m.Receipt, d)
	}
	res := p.Runner.Handle(ctx, Delivery{Body: m.Body, SentAt: m.SentAt, Visibility: vis}, extend)
	switch res.Action {
	case Delete:
		del.add(m.Queue, m.Receipt)
	case Hide:
		if err := extend(ctx, res.Delay); err != nil {
			p.Log.Warn("hide message", "task", m.Body, "err", err)
		}
	}
	if res.Err != nil {
		p.Log.Debug("task message handled", "task", m.Body, "action", res.Action, "err", res.Err)
	}
}

// batchLinger is how long a busy receiver waits to fill a batch, and how
// long a finished task's message may wait for nine others to be deleted
// with it. A late delete is harmless: the task is already SUCCEEDED, so a
// redelivery is dropped at its claim.
const batchLinger = 25 * time.Millisecond

// deleteLinger bounds how long a receipt waits to join a full batch.
const deleteLinger = 250 * time.Millisecond

// deleter batches message deletes, ten per request, flushing at least
// every deleteLinger.
type deleter struct {
	q    Queue
	log  *slog.Logger
	in   chan [2]string
	done chan struct{}
}

func newDeleter(q Queue, log *slog.Logger) *deleter {
	d := &deleter{q: q, log: log, in: make(chan [2]string, 100), done: make(chan struct{})}
	go d.loop()
	return d
}

func (d *deleter) add(url, receipt string) { d.in <- [2]string{url, receipt} }

func (d *deleter) close() { close(d.in); <-d.done }

func (d *deleter) loop() {
	defer close(d.done)
	pending := map[string][]string{}
	flush := func() {
		for url, rs := range pending {
			if err := d.q.DeleteBatch(context.Background(), url, rs); err != nil {
				d.log.Warn("delete messages", "err", err)
			}
		}
		clear(pending)
	}
	tick := time.NewTicker(deleteLinger)
	defer tick.Stop()
	for {
		select {
		case m, ok := <-d.in:
			if !ok {
				flush()
				return
			}
			pending[m[0]] = append(pending[m[0]], m[1])
			if len(pending[m[0]]) == 10 {
				rs := pending[m[0]]
				delete(pending, m[0])
				if err := d.q.DeleteBatch(context.Background(), m[0], rs); err != nil {
					d.log.Warn("delete messages", "err", err)
				}
			}
		case <-tick.C:
			flush()
		}
	}
}
