package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// RepairTask is the sweep's look at a task its index says is due: a task
// of an ended job is cancelled; a READY one whose message may be lost is
// sent another; a lapsed claim is expired (or, on its last attempt,
// exhausted) and retried; a FAILED one's failure is propagated; a
// committed one is counted if its committer died before it counted. The
// walk of the sweep's index is the sweep's own (sweep/sweep.go).
func (s *Lifecycle) RepairTask(ctx context.Context, it dynamo.DueItem, now time.Time, c *kernel.SweepCounts) error {
	t, err := s.store.TaskGet(ctx, it.Task)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	state, err := s.store.JobState(ctx, it.Job)
	if errors.Is(err, domain.ErrNotFound) {
		// A record its job's deletion passed by (a marker's look wrote
		// it meanwhile): out of the index, not an error every run.
		s.Logger(it.Task).Warn("task of a deleted job in the sweep index; taken out")
		return s.store.DueSet(ctx, it, time.Time{})
	}
	if err != nil {
		return err
	}
	if state != sm.JobRunning && !sm.Tasks.IsTerminal(t.State) {
		c.Cancelled++
		err := s.store.TaskSweep(ctx, dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskCancel, Now: now, Err: "job " + string(state)})
		if err == nil {
			// A running task of an ended job stops at its next heartbeat
			// without failing: its slots are freed here.
			s.Slots.FreeSlots(ctx, t.Ref, nil, time.Time{})
		}
		return kernel.IgnoreInvalid(err)
	}
	switch t.State {
	case sm.TaskReady:
		// Its message may be lost, or its backoff is longer than SQS can
		// delay: send one (a duplicate is rejected at claim) and look again
		// later.
		delay := max(t.NotBefore.Sub(now), 0)
		if err := s.Resend(ctx, t.Ref, t.TraceSpan, delay); err != nil {
			return err
		}
		c.Requeued++
		s.Meter().Repaired(kernel.Resent(t, now), 1) // kernel/metrics.go
		// A task that keeps waiting is more likely behind a backlog than
		// lost again, so the next look waits as long as the task already
		// has: a task queued for hours behind a small fleet is resent a
		// logarithmic number of times, not once per StuckAfter.
		wait := max(s.cfg.StuckAfter, now.Sub(t.Updated))
		return s.store.DueSet(ctx, it, now.Add(min(delay, queue.MaxDelay)+wait))
	case sm.TaskClaimed:
		if t.Copy.Live() {
			return s.copies.sweepCopiedTask(ctx, it, t, now) // speculation.go
		}
		if !now.After(t.LeaseUntil) {
			return nil // renewed since the index entry was written
		}
		if t.Attempt >= t.MaxAttempts {
			c.Exhausted++
			return s.exhaust(ctx, t, fmt.Sprintf("lease expired on attempt %d of %d (executor lost)", t.Attempt, t.MaxAttempts))
		}
		p := dynamo.SweepTaskParams{Ref: t.Ref, Event: sm.TaskExpire, Now: now, Err: "lease expired", Due: now.Add(s.cfg.StuckAfter)}
		kind, note := s.kills.expiryForMemory(ctx, t, &p) // oomkill.go
		err := s.store.TaskSweep(ctx, p)
		if errors.Is(err, sm.ErrInvalidTransition) {
			return nil
		}
		if err != nil {
			return err
		}
		c.Expired++
		s.Slots.FreeSlots(ctx, t.Ref, nil, t.SlotAt)
		s.NoteAttemptEnd(ctx, t.Ref, holderAttempt(t), kind, note, t) // speculation.go
		return s.Resend(ctx, t.Ref, t.TraceSpan, 0)
	case sm.TaskFailed:
		c.Failures++
		return s.propagateFailure(ctx, t)
	case sm.TaskSucceeded:
		// Its committer may have died between the commit and the count
		// (dynamo/count.go): count it before its entry goes.
		if err := s.ensureCounted(ctx, t.Ref, c); err != nil {
			return err
		}
	}
	return s.store.TaskUnindex(ctx, t)
}

// ensureCounted counts a committed task that was not, and when its shard
// is empty runs the stage's follow-up (afterShardDone): after this count,
// or after its committer's, who may have died before its follow-up.
func (s *Lifecycle) ensureCounted(ctx context.Context, ref domain.TaskRef, c *kernel.SweepCounts) error {
	shards, err := s.StageShards(ctx, ref.Job, ref.Stage)
	if err != nil {
		return err
	}
	counted, shardDone, err := s.store.ShardEnsureCounted(ctx, ref, shards)
	if err != nil {
		return err
	}
	if counted {
		c.Counted++
		s.Logger(ref).Warn("counted a committed task its committer had not counted")
	}
	if !shardDone {
		return nil
	}
	return s.afterShardDone(ctx, ref.Job, ref.Stage, dynamo.ShardOf(ref.Partition, shards))
}
