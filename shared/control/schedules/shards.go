package schedules

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
)

// Sharded firing. The index's schedule.ShardCount shards are fired by
// runs, each holding one shard's lease (schedule.ShardLease) while it
// fires that shard's due buckets, hands its window's firings to the timer
// queue and moves the shard's own watermark. The sweep's firing step runs
// every shard whose lease is free, a few at once; a shard its run could
// not finish within the run's budget (a burst: thousands due in one
// minute) is relayed as a "fire shard" message on the timer queue, whose
// consumer (the sweep function, concurrent invocations) runs it again and
// relays it again while work is left. So a busy minute is worked by up to
// ShardCount runs at once, and one shard by one run at a time.
//
// A run that dies holds its shard until the lease expires; the next run
// (the next sweep, or a relay) then takes it over and resumes from the
// shard's watermark, which its holder moved only past minutes it drained.
// Whatever it had half done is safe to redo: a firing is one job by its
// idempotency key (schedule.FiringKey), and only one firer moves a
// schedule's cursor from the value it planned with, so two runs that both
// think they hold a shard (one slow past its expiry) still record one job
// per firing; the slow one's watermark write is refused (it no longer
// holds the lease).

const (
	// shardLease is how long a run holds its shard: its time budget and a
	// margin for the requests in flight when the budget ends.
	shardLease = shardRunBudget + 15*time.Second
	// shardRunBudget is how long a run takes new work on its shard; what
	// is left then is relayed.
	shardRunBudget = 30 * time.Second
	// shardRuns is how many shards one sweep step (or FireDue) runs at
	// once; each fires up to fireWorkers entries at a time.
	shardRuns = 4
	// timerMaxPerShard bounds the firings one shard run hands off: a
	// shard's share of 100,000 firings in a minute is 6,250, about 9,400
	// in a TimerWindow of 90 s; 10,000 leaves a margin for an uneven
	// spread. Firings over it are not handed off: the sweep fires them
	// when they fall due. Reaching it never relays the shard, since a
	// relayed run would Query the same window and hand off the same
	// first firings again.
	timerMaxPerShard = 10000
)

// newRunID names a run in the leases it takes.
func newRunID() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// shardMsg is a "fire shard" message's body on the timer queue.
type shardMsg struct {
	FireShard *int `json:"fireShard"`
}

// parseShardMsg reads a "fire shard" message; ok is false for any other
// body.
func parseShardMsg(body string) (int, bool) {
	var m shardMsg
	if json.Unmarshal([]byte(body), &m) != nil || m.FireShard == nil || *m.FireShard < 0 || *m.FireShard >= schedule.ShardCount {
		return 0, false
	}
	return *m.FireShard, true
}

// shardRun is one run's work on one shard.
type shardRun struct {
	shard   int
	run     string
	global  time.Time // the index-wide watermark, for a shard with none
	handOff bool      // also hand the window's firings to the timer queue
	// stopBy ends the run's taking of new work (real time).
	stopBy time.Time
}

// fireShard takes the shard's lease and fires its due buckets from its
// watermark through now, then hands its window's firings off (if asked,
// and only if no work is left),
// moves its watermark and releases the lease. left says work remains for
// another run (a budget ran out). A shard leased by another live run is
// counted in Leased and left alone.
func (s *Firer) fireShard(ctx context.Context, r shardRun, now time.Time) (c FireCounts, left bool, err error) {
	l, err := s.store.ScheduleShardTake(ctx, r.shard, r.run, now, now.Add(shardLease))
	if errors.Is(err, dynamo.ErrShardLeased) {
		c.Leased++
		return c, false, nil
	}
	if err != nil {
		return c, false, err
	}
	c.Shards++
	var firstErr error
	note := func(err error) {
		if err != nil {
			c.Errors++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	from := l.From(r.global)
	drained := from
	budget := fireSchedules
	buckets, last := schedule.DueBuckets(from, now, fireMinutes)
	// A walk capped at fireMinutes (after downtime) leaves the minutes
	// after it to another run.
	left = last.Before(now.UTC().Truncate(time.Minute))
	for _, b := range buckets {
		if b.Shard != r.shard {
			continue
		}
		es, err := s.store.ScheduleDueEntries(ctx, b, budget+1)
		c.Buckets++
		if err != nil {
			note(err)
			break
		}
		fc, done := s.fireEntries(ctx, es, now, &budget, r.stopBy)
		c.add(fc.FireCounts)
		if firstErr == nil {
			firstErr = fc.err
		}
		if !done || fc.Errors > 0 {
			left = left || !done
			break
		}
		drained = b.Minute
	}
	if to, ok := l.AdvanceTo(r.global, drained, now); ok {
		err := s.store.ScheduleShardAdvance(ctx, r.shard, r.run, l.Watermark, to, s.now())
		if errors.Is(err, dynamo.ErrShardLost) {
			// Taken over: the new holder goes on from the watermark
			// as it found it, and redoes nothing twice.
			c.Lost++
		} else {
			note(err)
		}
	}
	// Only a run that leaves nothing behind hands off: a run with work
	// left is relayed (or the next sweep goes on), and the run that
	// finishes the shard hands its window off once, not every run of it.
	if r.handOff && !left && ctx.Err() == nil {
		// Firings over the limit are left to the sweep, which fires
		// them when due: no relay for them (see timerMaxPerShard).
		n, _, err := s.handOff(ctx, now, []int{r.shard}, timerMaxPerShard)
		c.HandedOff += n
		note(err)
	}
	// A run whose context ended (a process dying) releases nothing: its
	// lease expires.
	note(s.store.ScheduleShardRelease(ctx, r.shard, r.run))
	return c, left, firstErr
}

// entryCounts are one batch of entries' counts, and the first error.
type entryCounts struct {
	FireCounts
	err error
}

// fireEntries fires a bucket's entries, fireWorkers at a time, while the
// budget lasts and before stopBy; done says every entry was handled.
func (s *Firer) fireEntries(ctx context.Context, es []dynamo.IndexEntry, now time.Time, budget *int, stopBy time.Time) (entryCounts, bool) {
	var out entryCounts
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, fireWorkers)
	done := true
	for _, e := range es {
		if *budget == 0 || time.Now().After(stopBy) || ctx.Err() != nil {
			done = false
			break
		}
		*budget--
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var c FireCounts
			err := s.fireEntry(ctx, e, nil, now, &c, 2)
			mu.Lock()
			defer mu.Unlock()
			out.FireCounts.add(c)
			out.Examined++
			if err != nil {
				out.Errors++
				if out.err == nil {
					out.err = err
				}
			}
		})
	}
	wg.Wait()
	return out, done
}

func (c *FireCounts) add(o FireCounts) {
	c.Buckets += o.Buckets
	c.Examined += o.Examined
	c.Started += o.Started
	c.Skipped += o.Skipped
	c.Missed += o.Missed
	c.Dropped += o.Dropped
	c.Errors += o.Errors
	c.Shards += o.Shards
	c.Leased += o.Leased
	c.Lost += o.Lost
	c.Relayed += o.Relayed
	c.HandedOff += o.HandedOff
}

// fireShards runs every shard (shardRuns at once) as one run, r's fields
// but shard and stopBy as given, and relays the shards left unfinished
// when relay is set.
func (s *Firer) fireShards(ctx context.Context, now time.Time, r shardRun, relay bool) (FireCounts, error) {
	var c FireCounts
	var mu sync.Mutex
	var errs []error
	var left []int
	var wg sync.WaitGroup
	sem := make(chan struct{}, shardRuns)
	for sh := range schedule.ShardCount {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := r
			r.shard = sh
			fc, more, err := s.fireShard(ctx, r, now)
			mu.Lock()
			defer mu.Unlock()
			c.add(fc)
			if err != nil {
				errs = append(errs, fmt.Errorf("shard %d: %w", sh, err))
			}
			if more {
				left = append(left, sh)
			}
		})
	}
	wg.Wait()
	if relay && len(left) > 0 {
		n, err := s.relayShards(ctx, left)
		c.Relayed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	s.advanceGlobal(ctx, &c, r.global, now)
	return c, errors.Join(errs...)
}

// advanceGlobal moves the index-wide watermark up to the least of the
// shards' (a shard with none counts as the global one): it is where a
// shard without its own resumes, and what reports how far every shard
// was drained. Best effort: a failed read or a lost race leaves it, and
// no shard resumes from it once it has its own.
func (s *Firer) advanceGlobal(ctx context.Context, c *FireCounts, global, now time.Time) {
	ls, err := s.store.ScheduleShards(ctx)
	if err != nil || len(ls) < schedule.ShardCount {
		return
	}
	floor := now
	for _, l := range ls {
		if wm := l.From(global); wm.Before(floor) {
			floor = wm
		}
	}
	if floor.After(global) {
		if err := s.store.ScheduleAdvanceWatermark(ctx, global, floor); err != nil {
			c.Errors++
		}
	}
}

// relayShards sends a "fire shard" message for each shard, for the timer
// queue's consumer to run at once, and says how many it sent: none
// without a timer queue (the next sweep goes on with them).
func (s *Firer) relayShards(ctx context.Context, shards []int) (int, error) {
	if s.cfg.TimerQueue == "" {
		return 0, nil // the next sweep goes on with them
	}
	sends := make([]queue.Send, 0, len(shards))
	for _, sh := range shards {
		body, err := json.Marshal(shardMsg{FireShard: &sh})
		if err != nil {
			return 0, fmt.Errorf("relay shards: %w", err)
		}
		sends = append(sends, queue.Send{Body: string(body)})
	}
	if err := s.queue.SendBatch(ctx, s.cfg.TimerQueue, sends); err != nil {
		return 0, fmt.Errorf("relay shards %v: %w", shards, err)
	}
	return len(sends), nil
}

// FireShard is one run of one shard, as a "fire shard" message asks and
// as tests drive it: it fires the shard if no other run holds it, and
// relays the shard again if work is left or else hands its window's
// firings off.
func (s *Firer) FireShard(ctx context.Context, shard int, now time.Time) (FireCounts, error) {
	global, ok, err := s.store.ScheduleWatermark(ctx)
	if err != nil || !ok {
		return FireCounts{}, err
	}
	r := shardRun{shard: shard, run: newRunID(), global: global, handOff: true, stopBy: runStop(ctx)}
	c, left, err := s.fireShard(ctx, r, now)
	// A failed run's message is delivered again (FireTimers keeps it),
	// and that delivery goes on with the shard: a relay too would make
	// two messages of one, and each failing again, four.
	if left && err == nil && ctx.Err() == nil {
		n, rerr := s.relayShards(ctx, []int{shard})
		c.Relayed += n
		if rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return c, err
}

// runStop is when a run stops taking new work: its budget, or earlier if
// its context ends sooner (a sweep step's own budget), less a margin for
// the work in flight: 3 s, or a quarter of a shorter budget (a sweep
// step's budget is a third of what its run has left, and a margin of a
// fixed 3 s would leave a short one no time to fire at all).
func runStop(ctx context.Context) time.Time {
	stop := time.Now().Add(shardRunBudget)
	if d, ok := ctx.Deadline(); ok {
		if by := d.Add(-min(3*time.Second, time.Until(d)/4)); by.Before(stop) {
			stop = by
		}
	}
	return stop
}

// fireShardMessage handles a "fire shard" message from the timer queue.
func (s *Firer) fireShardMessage(ctx context.Context, shard int) (TimerOutcome, error) {
	c, err := s.FireShard(ctx, shard, s.now())
	if err != nil {
		return "", fmt.Errorf("fire shard %d: %w", shard, err)
	}
	if c.Leased > 0 {
		return TimerDropped, nil // another run has it
	}
	return TimerFired, nil
}
