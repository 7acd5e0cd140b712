package control

import (
	"context"
	"errors"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// DeadlineReason is the error of a job failed by its deadline.
const DeadlineReason = "deadline exceeded"

// jobDeadline is when j's deadline passes, or zero without one.
func jobDeadline(j batch.Job) time.Time {
	if j.Spec == nil || j.Spec.Deadline <= 0 {
		return time.Time{}
	}
	return j.Created.Add(time.Duration(j.Spec.Deadline))
}

// sweepJob handles a job the sweep index says is due: a job with a
// deadline is indexed at it from submission. Past it, a RUNNING job fails
// with DeadlineReason and its stages are cancelled, and from then on the
// job's state does the rest, as for a cancel: claims on it fail (within
// JobStateTTL), running tasks are stopped by their runner's job watch
// (within two JobStateTTLs and a read), and the sweep
// cancels tasks it finds. Failing is a guarded transition, so two sweeps
// (or a job finishing at the same moment) end it once.
func (s *Service) sweepJob(ctx context.Context, it dynamo.DueItem, now time.Time, c *SweepCounts) error {
	j, err := s.store.GetJob(ctx, it.Job)
	if errors.Is(err, batch.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if sm.Jobs.IsTerminal(j.State) && s.cfg.Retention > 0 {
		// Its retention's end (retention.go).
		return s.expireJob(ctx, it, j, now)
	}
	if j.State != sm.JobRunning {
		// Ending a job takes it out of the index; this is a leftover.
		return s.store.SetDue(ctx, it, time.Time{})
	}
	if err := s.sweepRedrive(ctx, j); err != nil { // redrive.go
		return err
	}
	deadline := jobDeadline(j)
	if deadline.IsZero() {
		return s.store.SetDue(ctx, it, time.Time{})
	}
	if now.Before(deadline) {
		return s.store.SetDue(ctx, it, deadline)
	}
	err = s.endJob(ctx, j.ID, sm.JobFail, DeadlineReason, "", now)
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
	return s.cancelStages(ctx, j.ID, -1)
}
