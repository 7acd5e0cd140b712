package kernel

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lru"
	sm "github.com/batchwork/batchwork/statemachine"
)

// DefaultJobStateTTL is how long a process trusts a job's state it read:
// claims and running tasks check a job's state against a copy at most this
// old, so a process reads each running job's state once per TTL, whatever
// its number of claims and tasks.
//
// What it bounds (see docs/guarantees.md): no task of a job is claimed
// and started more than one TTL after the job ended (cancelled, failed,
// past its deadline), and a task that is, or was running when the job
// ended, is stopped by its executor's job watch (Runner, every TTL) within
// two TTLs and a read.
const DefaultJobStateTTL = time.Second

// jobStates caches jobs' states per process. A RUNNING (or PUBLISHING) state is trusted
// for the TTL counted from when its read started, so a decision at time t rests
// on a read that began after t-TTL: a job that ended before that is seen.
// An ended state is final. Concurrent askers of one stale job wait for one
// read.
type jobStates struct {
	ttl   time.Duration
	now   func() time.Time // monotonic, never the service's injected clock
	cache *lru.Cache[string, *jobStateEntry]
	mu    sync.Mutex // guards creating entries
}

type jobStateEntry struct {
	mu     sync.Mutex
	state  sm.JobState
	readAt time.Time // when the read that gave state started
}

func newJobStates(ttl time.Duration) *jobStates {
	return &jobStates{ttl: ttl, now: time.Now, cache: lru.New[string, *jobStateEntry](specCacheSize)}
}

func (c *jobStates) entry(job string) *jobStateEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cache.Get(job)
	if !ok {
		e = &jobStateEntry{}
		c.cache.Put(job, e)
	}
	return e
}

// get returns the job's state, reading it with read when the cached one is
// older than the TTL (a TTL of zero or less reads every time).
func (c *jobStates) get(ctx context.Context, job string, read func(context.Context, string) (sm.JobState, error)) (sm.JobState, error) {
	asked := c.now()
	e := c.entry(job)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != "" && (final(e.state) || c.trusted(e, asked)) {
		return e.state, nil
	}
	start := c.now()
	st, err := read(ctx, job)
	if err != nil {
		return st, err
	}
	if st == sm.JobWaiting {
		// Not kept: its start may come any moment, and a claim must then
		// see it RUNNING at once (admission/startat.go).
		return st, nil
	}
	e.state, e.readAt = st, start
	return st, nil
}

// final says a cached state never changes again: an ended job's, but a
// FAILED job's, which its owner's redrive can reopen (operations/redrive.go).
func final(st sm.JobState) bool { return sm.Jobs.IsTerminal(st) && st != sm.JobFailed }

// trusted says whether e's state, not final, answers an ask made at
// asked: a RUNNING (or PUBLISHING) one within the TTL of its read, a
// FAILED one only from a read that started after the ask (concurrent
// askers share it). A FAILED job is reopened by its owner's redrive from
// another process: a cached FAILED would refuse a redriven task's claim
// (cancelling it, or dropping its message) or stop its attempt, leaving
// it minutes to the sweep's repair, and the redrive's delay of its tasks
// does not cover a task claimed at the redrive. Only a failed job's
// asks pay the reads.
func (c *jobStates) trusted(e *jobStateEntry, asked time.Time) bool {
	if e.state == sm.JobFailed {
		return !e.readAt.Before(asked)
	}
	return c.ttl > 0 && c.now().Sub(e.readAt) < c.ttl
}

// ended records that this process saw job end, with state st when it
// knows it, so its own claims stop at once rather than after the TTL.
func (c *jobStates) Ended(job string, st sm.JobState) {
	e := c.entry(job)
	e.mu.Lock()
	defer e.mu.Unlock()
	if st != "" && sm.Jobs.IsTerminal(st) { // PUBLISHING is not final
		e.state = st
		return
	}
	e.readAt = time.Time{} // ended somehow: read again at the next ask
}

// CachedJobState is the job's state as this process knows it, at most the
// TTL old, trying a failed read again: a transient error must not strand a
// fresh claim for a whole lease (the SDK's own retries have already run
// under each try).
func (s *Kernel) CachedJobState(ctx context.Context, job string) (sm.JobState, error) {
	var err error
	for try, wait := 0, 50*time.Millisecond; try < 4; try, wait = try+1, wait*2 {
		var state sm.JobState
		if state, err = s.jobStates.get(ctx, job, s.store.JobState); err == nil || errors.Is(err, domain.ErrNotFound) {
			return state, err
		}
		select {
		case <-ctx.Done():
			return "", errors.Join(err, ctx.Err())
		case <-time.After(wait + s.Jitter(wait)):
		}
	}
	return "", err
}

// CheckJob says whether a claim's job still runs, from the process's
// job-state cache: domain.ErrJobNotRunning once it ended. The runner calls
// it every JobStateTTL while a task runs, so a task of an ended job stops
// within two TTLs and a read, and a process makes at most one read per job
// per TTL for all its tasks.
func (s *Kernel) CheckJob(ctx context.Context, c Claim) error {
	state, err := s.CachedJobState(ctx, c.Task.Ref.Job)
	if err != nil {
		return err
	}
	if state != sm.JobRunning {
		return fmt.Errorf("task %s: job is %s: %w", c.Task.Ref, state, domain.ErrJobNotRunning)
	}
	return nil
}

// JobStateTTL is how often the runner should call CheckJob.
func (s *Kernel) JobStateTTL() time.Duration { return s.jobStates.ttl }

// EndJob ends a RUNNING job (Store.EndJobEvent) and notes in this process's
// cache that it ended: when this call ended it, as what; when it had
// already ended (sm.ErrInvalidTransition), the next ask reads it again.
func (s *Kernel) EndJob(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) error {
	return s.EndJobGen(ctx, id, ev, reason, manifest, now, -1)
}

// EndJobGen is EndJob for a decision made at redrive count gen (< 0:
// the job's count now; jobgen.go).
func (s *Kernel) EndJobGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) error {
	// A redriven job's ended event has an id of its own per redrive
	// (events.JobEndedID), which the store's write knows.
	var eid string
	var err error
	if gen >= 0 {
		eid, err = s.store.JobEndGen(ctx, id, ev, reason, manifest, now, gen)
	} else {
		eid, err = s.store.JobEndEvent(ctx, id, ev, reason, manifest, now)
	}
	switch {
	case err == nil:
		s.jobStates.Ended(id, sm.Jobs.Transition(ev).To)
		s.PublishEvents(ctx, eid) // events.go
		if ev == sm.JobFail {
			s.Meter().JobFailed() // metrics.go
		}
	case errors.Is(err, sm.ErrInvalidTransition):
		s.jobStates.Ended(id, "")
	}
	return err
}

// SetJobStateClock replaces the job-state cache's clock, which is the
// monotonic wall clock and never Now, so that a test can age the cache's
// entries without moving the service's time.
func (s *Kernel) SetJobStateClock(now func() time.Time) { s.jobStates.now = now }
