package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// SweepCounts says what one sweep run did.
type SweepCounts struct {
	Examined     int `json:"examined"`
	Requeued     int `json:"requeued"`
	Expired      int `json:"expired"`
	Exhausted    int `json:"exhausted"`
	Cancelled    int `json:"cancelled"`
	StagesFixed  int `json:"stagesFixed"`
	Failures     int `json:"failuresPropagated"`
	DeadLettered int `json:"deadLettered"`
	Errors       int `json:"errors"`
	Fired        int `json:"schedulesFired"`
	HandedOff    int `json:"timersHandedOff"`
	Deadlines    int `json:"deadlinesExceeded"`
}

// Sweep repairs what SQS cannot: tasks whose message was lost, expired
// claims, backoffs longer than SQS's delay, steps interrupted by a crash,
// and dead-lettered messages. It looks at a bounded number of records per
// run, and every action is a conditional write, so two sweeps at once are
// harmless.
func (s *Service) Sweep(ctx context.Context) (SweepCounts, error) {
	var c SweepCounts
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
	for shard := 0; shard < dynamo.DueShards; shard++ {
		items, err := s.store.DueItems(ctx, shard, now, s.cfg.SweepLimit)
		if err != nil {
			note(err)
			continue
		}
		for _, it := range items {
			c.Examined++
			switch it.Kind {
			case dynamo.DueTask:
				note(s.sweepTask(ctx, it, now, &c))
			case dynamo.DueStage:
				note(s.sweepStage(ctx, it, now, &c))
			case dynamo.DueJob:
				note(s.sweepJob(ctx, it, now, &c))
			default:
				note(s.store.SetDue(ctx, it, time.Time{}))
			}
		}
	}
	note(s.sweepDeadLetters(ctx, &c))
	note(s.sweepSchedules(ctx, now, &c))
	s.log.Info("sweep", "counts", c)
	if firstErr != nil {
		return c, fmt.Errorf("sweep: %d errors, first: %w", c.Errors, firstErr)
	}
	return c, nil
}

func (s *Service) sweepTask(ctx context.Context, it dynamo.DueItem, now time.Time, c *SweepCounts) error {
	t, err := s.store.GetTask(ctx, it.Task)
	if errors.Is(err, batch.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	state, err := s.store.JobState(ctx, it.Job)
	if err != nil {
		return err
	}
	if state != sm.JobRunning && !sm.Tasks.IsTerminal(t.State) {
		c.Cancelled++
		err := s.store.SweepTask(ctx, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskCancel, Now: now, Err: "job " + string(state)})
		if err == nil {
			// A running task of an ended job stops at its next heartbeat
			// without failing: its slots are freed here.
			s.freeSlots(ctx, t.Ref, nil, time.Time{})
		}
		return ignoreInvalid(err)
	}
	switch t.State {
	case sm.TaskReady:
		// Its message may be lost, or its backoff is longer than SQS can
		// delay: send one (a duplicate is rejected at claim) and look again
		// later.
		delay := max(t.NotBefore.Sub(now), 0)
		if err := s.resend(ctx, t.Ref, delay); err != nil {
			return err
		}
		c.Requeued++
		// A task that keeps waiting is more likely behind a backlog than
		// lost again, so the next look waits as long as the task already
		// has: a task queued for hours behind a small fleet is resent a
		// logarithmic number of times, not once per StuckAfter.
		wait := max(s.cfg.StuckAfter, now.Sub(t.Updated))
		return s.store.SetDue(ctx, it, now.Add(min(delay, queue.MaxDelay)+wait))
	case sm.TaskClaimed:
		if !now.After(t.LeaseUntil) {
			return nil // renewed since the index entry was written
		}
		if t.Attempt >= t.MaxAttempts {
			c.Exhausted++
			return s.exhaust(ctx, t, fmt.Sprintf("lease expired on attempt %d of %d (executor lost)", t.Attempt, t.MaxAttempts))
		}
		err := s.store.SweepTask(ctx, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskExpire, Now: now,
			Err: "lease expired", Due: now.Add(s.cfg.StuckAfter)})
		if errors.Is(err, sm.ErrInvalidTransition) {
			return nil
		}
		if err != nil {
			return err
		}
		c.Expired++
		s.freeSlots(ctx, t.Ref, nil, t.SlotAt)
		s.noteAttemptEnd(ctx, t.Ref, t.Attempt, batch.AttemptLeaseExpired, "lease expired (executor lost)")
		return s.resend(ctx, t.Ref, 0)
	case sm.TaskFailed:
		c.Failures++
		return s.propagateFailure(ctx, t)
	}
	return s.store.SetDue(ctx, it, time.Time{})
}

func (s *Service) resend(ctx context.Context, ref batch.TaskRef, delay time.Duration) error {
	sp, err := s.jobSpec(ctx, ref.Job)
	if err != nil {
		return err
	}
	return s.queue.SendBatch(ctx, s.cfg.Queues.For(sp.StagePriority(ref.Stage)), []queue.Send{{Body: ref.String(), Delay: delay}})
}

func (s *Service) sweepStage(ctx context.Context, it dynamo.DueItem, now time.Time, c *SweepCounts) error {
	st, err := s.store.GetStage(ctx, it.Job, it.Stage)
	if err != nil {
		return err
	}
	sp, err := s.jobSpec(ctx, it.Job)
	if err != nil {
		return err
	}
	state, err := s.store.JobState(ctx, it.Job)
	if err != nil {
		return err
	}
	if state != sm.JobRunning && !sm.Stages.IsTerminal(st.State) {
		if err := s.cancelStages(ctx, it.Job); err != nil {
			return err
		}
		return s.store.SetDue(ctx, it, time.Time{})
	}
	switch st.State {
	case sm.StageBlocked:
		stages, err := s.store.ListStages(ctx, it.Job)
		if err != nil {
			return err
		}
		if upstreamCompleted(sp, it.Stage, func(i int) sm.StageState { return stages[i].State }) {
			c.StagesFixed++
			return s.startStage(ctx, it.Job, sp, it.Stage)
		}
		return s.store.SetDue(ctx, it, time.Time{})
	case sm.StageRunning:
		if !st.Materialized {
			c.StagesFixed++
			return s.materialize(ctx, it.Job, sp, it.Stage)
		}
		completed, err := s.completeStage(ctx, it.Job, it.Stage)
		if err != nil || completed {
			// A completed stage's follow-up took it out of the index; do
			// not put it back to be done again.
			return err
		}
		return s.store.SetDue(ctx, it, now.Add(s.cfg.CheckEvery))
	case sm.StageCompleted:
		c.StagesFixed++
		return s.afterStageCompleted(ctx, it.Job, it.Stage)
	}
	return s.store.SetDue(ctx, it, time.Time{})
}

// sweepDeadLetters looks at a bounded batch of dead-lettered messages. A
// message of a finished task is dropped; one of a live task goes back to its
// ready queue (its attempts, not its deliveries, decide when it fails). A
// message that names no task stays for an operator (the DLQ alarm fires).
func (s *Service) sweepDeadLetters(ctx context.Context, c *SweepCounts) error {
	if s.cfg.Queues.DLQ == "" {
		return nil
	}
	msgs, err := s.queue.Receive(ctx, s.cfg.Queues.DLQ, 10, 0, 30*time.Second)
	if err != nil {
		return err
	}
	var done []string
	for _, m := range msgs {
		if isTimerBody(m.Body) {
			// A firing its consumer kept failing: the sweep fires it
			// (FireDue) whatever happens to the message.
			c.DeadLettered++
			done = append(done, m.Receipt)
			continue
		}
		ref, err := batch.ParseTaskRef(m.Body)
		if err != nil {
			s.log.Error("dead-lettered message names no task", "message_id", m.ID, "err", err)
			continue
		}
		t, err := s.store.GetTask(ctx, ref)
		if err != nil && !errors.Is(err, batch.ErrNotFound) {
			return err
		}
		if err == nil && !sm.Tasks.IsTerminal(t.State) {
			if err := s.resend(ctx, ref, 0); err != nil {
				return err
			}
		}
		c.DeadLettered++
		done = append(done, m.Receipt)
	}
	if len(done) == 0 {
		return nil
	}
	return s.queue.DeleteBatch(ctx, s.cfg.Queues.DLQ, done)
}
