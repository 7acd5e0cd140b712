package sweep

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Sweep repairs what SQS cannot: tasks whose message was lost, expired
// claims, backoffs longer than SQS's delay, steps interrupted by a crash,
// and dead-lettered messages. It looks at a bounded number of records per
// run, and every action is a conditional write, so two sweeps at once are
// harmless.
//
// One run serves every owner, so no single record may stop it (see
// sweepStep): each step has its own time budget and a panic is its error;
// the dead-letter redrive and the schedule fallback run first; a large
// index's shards are walked from a random one; and a stage's next look is pushed back
// before work on it that could crash the process (deferStage).
func (s *Sweeper) Sweep(ctx context.Context) (kernel.SweepCounts, error) {
	var c kernel.SweepCounts
	now := s.Now()
	var firstErr error
	note := func(err error) {
		if err != nil {
			c.Errors++
			if firstErr == nil {
				firstErr = err
			}
		}
	}
	note(s.sweepStep(ctx, "dead letters", &c, func(ctx context.Context, c *kernel.SweepCounts) error {
		return s.sweepDeadLetters(ctx, c)
	}))
	note(s.sweepStep(ctx, "schedules", &c, func(ctx context.Context, c *kernel.SweepCounts) error {
		return s.firer.Sweep(ctx, now, c)
	}))
	var pendingEvents []string // outbox records, published in batches after the walk (kernel/events.go)
	// handle looks at one read's items; false: the run's context ended.
	handle := func(where string, items []dynamo.DueItem) bool {
		for _, it := range items {
			if err := ctx.Err(); err != nil {
				note(fmt.Errorf("sweep stopped in %s: %w", where, err))
				return false
			}
			c.Examined++
			if it.Kind == dynamo.DueEvent {
				pendingEvents = append(pendingEvents, it.Event)
				continue
			}
			note(s.sweepStep(ctx, dueName(it), &c, func(ctx context.Context, c *kernel.SweepCounts) error {
				return s.SweepItem(ctx, it, now, c)
			}))
		}
		return true
	}
	// A small index is read whole in one request; a large one (or a
	// failed read) is walked shard by shard, from a random one.
	// A failed whole read is a warning, not the run's error: the walk
	// that follows covers the index (a role granted Query alone, before
	// the sweep could Scan, leaves the sweep as it was). A whole read
	// that answered with an error beside its records (one it could not
	// read) is the run's error, as a shard's is in the walk: walking
	// would meet the same record, and the next run reads it again.
	items, whole, err := s.store.DueScan(ctx, now, s.cfg.SweepLimit)
	switch {
	case whole:
		note(err)
	case err != nil:
		s.log.Warn("sweep: read of the whole index failed; walking its shards", "err", err)
	}
	if whole {
		handle("the index", items)
	} else {
		first := rand.IntN(dynamo.DueShards)
		for i := range dynamo.DueShards {
			shard := (first + i) % dynamo.DueShards
			if err := ctx.Err(); err != nil {
				note(fmt.Errorf("sweep stopped before shard %d: %w", shard, err))
				break
			}
			// A record that cannot be read is an error beside the
			// others' items, which are handled all the same.
			items, err := s.store.DueList(ctx, shard, now, s.cfg.SweepLimit)
			note(err)
			if !handle(fmt.Sprintf("shard %d", shard), items) {
				break
			}
		}
	}
	// The walk's markers of completed stages, all in one request.
	note(s.store.DueRemoveDone(ctx))
	if len(pendingEvents) > 0 {
		note(s.sweepStep(ctx, "events", &c, func(ctx context.Context, c *kernel.SweepCounts) error {
			return s.SweepEvents(ctx, pendingEvents, now, c)
		}))
	}
	s.log.Info("sweep", "counts", c)
	s.SweepRepairs(c) // kernel/metrics.go
	if firstErr != nil {
		return c, fmt.Errorf("sweep: %d errors, first: %w", c.Errors, firstErr)
	}
	return c, nil
}

// SweepItem repairs one due record as a run's step does, without the
// step's budget: what the record's kind asks for, or its removal from the
// index when nothing does.
func (s *Sweeper) SweepItem(ctx context.Context, it dynamo.DueItem, now time.Time, c *kernel.SweepCounts) error {
	// A repair's requests are its job's cost (shared/cost/meter).
	ctx = meter.WithJob(ctx, it.Job)
	switch it.Kind {
	case dynamo.DueTask:
		return s.tasks.RepairTask(ctx, it, now, c)
	case dynamo.DueStage:
		return s.sweepStage(ctx, it, now, c)
	case dynamo.DueJob:
		return s.sweepJob(ctx, it, now, c)
	}
	return s.store.DueSet(ctx, it, time.Time{})
}

func dueName(it dynamo.DueItem) string {
	switch it.Kind {
	case dynamo.DueTask:
		return "task " + it.Task.String()
	case dynamo.DueStage:
		return fmt.Sprintf("stage %s/%d", it.Job, it.Stage)
	}
	return fmt.Sprintf("%s %s", it.Kind, it.Job)
}

// SweepStepBudget caps the time of one step of a sweep run: one due
// record, the dead-letter redrive or the schedule fallback. A step never
// gets more than a third of what is left of the run either, so whatever
// one step does, the steps after it keep two thirds of the time.
const SweepStepBudget = 20 * time.Second

// SweepBackoffMax caps how far deferStage pushes a stage's next look.
const SweepBackoffMax = 15 * time.Minute

var (
	// ErrStepPanicked: a sweep step panicked; the run went on without it.
	ErrStepPanicked = errors.New("sweep step panicked")
	// ErrStepOverBudget: a sweep step did not return within its budget; the
	// run went on without waiting for it.
	ErrStepOverBudget = errors.New("sweep step overran its time budget")
)

// sweepStep runs one step of a sweep run with its own deadline and its own
// counts, added to c when it returns. A panic becomes the step's error.
// A step that has not returned by the end of its budget and a short grace
// (to return its context's error) is left running and reported: waiting
// for it would hand its hang to every step after it, and leaving it is
// safe, as every step is a conditional write that a later run repeats.
// Its counts are dropped, so nothing it does later touches this run's.
func (s *Sweeper) sweepStep(ctx context.Context, name string, c *kernel.SweepCounts, step func(context.Context, *kernel.SweepCounts) error) error {
	budget := SweepStepBudget
	if deadline, ok := ctx.Deadline(); ok {
		budget = min(budget, time.Until(deadline)/3)
	}
	stepCtx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	type result struct {
		counts kernel.SweepCounts
		err    error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				s.log.Error("sweep step panicked", "step", name, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				r.err = fmt.Errorf("%s: %w: %v", name, ErrStepPanicked, p)
			}
			done <- r
		}()
		r.err = step(stepCtx, &r.counts)
	}()
	var r result
	select {
	case r = <-done:
	case <-stepCtx.Done():
		select {
		case r = <-done:
		case <-time.After(max(min(budget/10, time.Second), 10*time.Millisecond)):
			s.log.Error("sweep step left running past its budget", "step", name, "budget", budget)
			return fmt.Errorf("%s: %w (%v)", name, ErrStepOverBudget, budget)
		}
	}
	c.Add(r.counts)
	return r.err
}

// deferStage pushes a stage's next look back before the sweep works on it
// in ways that could take the whole process down: planning, materializing
// and writing manifests hold memory in proportion to what a user asked
// for, and a crash (out of memory, a timeout) is no error that a handler
// could answer. Left due, such a stage would be the first thing every
// following run does, and crash it too. Pushed back, the runs in between
// do everything else. The wait is the time the step has been pending
// (since, if known), at least StartGrace and at most SweepBackoffMax: a
// stage that crashes every run is looked at after 30 s, 1 min, 2 min, ...
// Work that goes well writes the stage's next look itself (a chunk
// recorded, a completion, a check that finds it still running), which
// replaces this one; an error leaves it, so an error backs off too.
func (s *Sweeper) deferStage(ctx context.Context, it dynamo.DueItem, now, since time.Time) error {
	wait := s.cfg.StartGrace
	if !since.IsZero() {
		wait = max(wait, now.Sub(since))
	}
	return s.store.DueSet(ctx, it, now.Add(min(wait, SweepBackoffMax)))
}

func (s *Sweeper) sweepStage(ctx context.Context, it dynamo.DueItem, now time.Time, c *kernel.SweepCounts) error {
	st, err := s.store.StageGet(ctx, it.Job, it.Stage)
	if err != nil {
		return err
	}
	sp, err := s.CachedSpec(ctx, it.Job)
	if err != nil {
		return err
	}
	// The redrive count first: a job seen ended is at that count or was
	// redriven since, which the cancellations then leave alone.
	gen, err := s.RedriveGen(ctx, it.Job, -1) // kernel/jobgen.go
	if err != nil {
		return err
	}
	state, err := s.store.JobState(ctx, it.Job)
	if err != nil {
		return err
	}
	if state == sm.JobWaiting {
		// Not started: its start puts its root stages back (admission/startat.go).
		return s.store.DueSet(ctx, it, time.Time{})
	}
	if state != sm.JobRunning && !sm.Stages.IsTerminal(st.State) {
		if err := s.stages.CancelStages(ctx, it.Job, gen); err != nil {
			return err
		}
		return s.store.DueSet(ctx, it, time.Time{})
	}
	switch st.State {
	case sm.StageBlocked:
		all, err := s.store.StageList(ctx, it.Job)
		if err != nil {
			return err
		}
		if stages.UpstreamCompleted(sp, it.Stage, func(i int) sm.StageState { return all[i].State }) {
			c.StagesFixed++
			if err := s.deferStage(ctx, it, now, time.Time{}); err != nil {
				return err
			}
			return s.stages.StartStage(ctx, it.Job, sp, it.Stage)
		}
		return s.store.DueSet(ctx, it, time.Time{})
	case sm.StageRunning:
		if err := s.deferStage(ctx, it, now, st.Started); err != nil {
			return err
		}
		if !st.Materialized {
			c.StagesFixed++
			return s.stages.Materialize(ctx, it.Job, sp, it.Stage)
		}
		completed, err := s.stages.CompleteStage(ctx, it.Job, it.Stage)
		if err != nil || completed {
			// A completed stage's follow-up took it out of the index; do
			// not put it back to be done again.
			return err
		}
		if err := s.tasks.Copies().Speculate(ctx, it.Job, sp, st, now, c); err != nil {
			return err
		}
		return s.store.DueSet(ctx, it, now.Add(s.cfg.CheckEvery))
	case sm.StageCompleted:
		c.StagesFixed++
		if err := s.deferStage(ctx, it, now, st.Ended); err != nil {
			return err
		}
		return s.stages.AfterStageCompleted(ctx, it.Job, it.Stage)
	}
	return s.store.DueSet(ctx, it, time.Time{})
}

// sweepDeadLetters looks at a bounded batch of dead-lettered messages. A
// message of a finished task is dropped; one of a live task goes back to its
// ready queue (its attempts, not its deliveries, decide when it fails). A
// message that names no task stays for an operator (the DLQ alarm fires).
func (s *Sweeper) sweepDeadLetters(ctx context.Context, c *kernel.SweepCounts) error {
	if s.cfg.DLQ == "" {
		return nil
	}
	// Several batches a run, each message hidden for an hour once read: a
	// message that names no task stays for an operator, and must not come
	// back every run to crowd out the ones that do (a batch holds 10).
	for range dlqBatches {
		msgs, err := s.queue.Receive(ctx, s.cfg.DLQ, 10, 0, dlqHide)
		if err != nil || len(msgs) == 0 {
			return err
		}
		if err := s.redrive(ctx, msgs, c); err != nil {
			return err
		}
	}
	return nil
}

// Dead-letter reading: batches per sweep run, and how long a read message
// stays hidden (a message of a task is deleted once handled).
const (
	dlqBatches = 10
	dlqHide    = time.Hour
)

// redrive handles one batch of dead-lettered messages.
func (s *Sweeper) redrive(ctx context.Context, msgs []queue.Message, c *kernel.SweepCounts) error {
	var done []string
	for _, m := range msgs {
		if isTimerBody(m.Body) {
			// A firing its consumer kept failing: the sweep fires it
			// (FireDue) whatever happens to the message.
			c.DeadLettered++
			done = append(done, m.Receipt)
			continue
		}
		body, _ := tasks.IsCopyMessage(m.Body) // a copy's: resent as its task's
		ref, err := domain.ParseTaskRef(body)
		if err != nil {
			s.log.Error("dead-lettered message names no task", "message_id", m.ID, "err", err)
			continue
		}
		t, err := s.store.TaskGet(ctx, ref)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return err
		}
		waiting := err == nil && !sm.Tasks.IsTerminal(t.State)
		if errors.Is(err, domain.ErrNotFound) {
			// Unwritten (sm.TaskUnwritten), its message never claimed,
			// while its job runs; or its job is gone.
			state, serr := s.CachedJobState(ctx, ref.Job)
			if serr != nil && !errors.Is(serr, domain.ErrNotFound) {
				return serr
			}
			waiting = serr == nil && state == sm.JobRunning
		}
		if waiting {
			if err := s.Resend(ctx, ref, t.TraceSpan, 0); err != nil {
				return err
			}
		}
		c.DeadLettered++
		done = append(done, m.Receipt)
	}
	if len(done) == 0 {
		return nil
	}
	return s.queue.DeleteBatch(ctx, s.cfg.DLQ, done)
}

// DeadlineReason is the error of a job failed by its deadline.
const DeadlineReason = "deadline exceeded"

// sweepJob handles a job the sweep index says is due: a job with a
// deadline is indexed at it from submission. Past it, a RUNNING job fails
// with DeadlineReason and its stages are cancelled, and from then on the
// job's state does the rest, as for a cancel: claims on it fail (within
// JobStateTTL), running tasks are stopped by their runner's job watch
// (within two JobStateTTLs and a read), and the sweep
// cancels tasks it finds. Failing is a guarded transition, so two sweeps
// (or a job finishing at the same moment) end it once.
func (s *Sweeper) sweepJob(ctx context.Context, it dynamo.DueItem, now time.Time, c *kernel.SweepCounts) error {
	j, err := s.store.JobGet(ctx, it.Job)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sm.Jobs.IsTerminal(j.State) && s.cfg.Retention > 0 {
		// Its retention's end (operations/retention.go).
		return s.ops.ExpireJob(ctx, it, j, now)
	}
	if j.State == sm.JobWaiting {
		// Its deadline counts from its start time (kernel.JobDeadline);
		// a start that is late leaves it for later, not failed unstarted.
		next := now.Add(s.cfg.StartGrace)
		if d := kernel.JobDeadline(j); d.After(next) {
			next = d
		}
		return s.store.DueSet(ctx, it, next)
	}
	if j.State != sm.JobRunning {
		// Ending a job takes it out of the index; this is a leftover.
		return s.store.DueSet(ctx, it, time.Time{})
	}
	if err := s.ops.SweepRedrive(ctx, j); err != nil { // operations/redrive.go
		return err
	}
	deadline := kernel.JobDeadline(j)
	if deadline.IsZero() {
		return s.store.DueSet(ctx, it, time.Time{})
	}
	if now.Before(deadline) {
		return s.store.DueSet(ctx, it, deadline)
	}
	err = s.EndJob(ctx, j.ID, sm.JobFail, DeadlineReason, "", now)
	switch {
	case err == nil:
		c.Deadlines++
		s.log.Error("job failed", "job_id", j.ID, "reason", DeadlineReason, "deadline", deadline)
	case errors.Is(err, sm.ErrInvalidTransition):
		// It ended meanwhile; its stages are someone else's to cancel,
		// but cancelling again is harmless.
	default:
		return err
	}
	return s.stages.CancelStages(ctx, j.ID, -1)
}

// isTimerBody reports whether a (dead-lettered) message is a timer
// queue's message.
func isTimerBody(body string) bool {
	_, relay := stages.ParseRelay(body) // the sweep materializes its stage anyway
	return schedules.IsTimerMessage(body) || relay
}
