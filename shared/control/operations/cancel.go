package operations

import (
	"context"
	"errors"
	"fmt"

	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrJobEnded means the job already finished, so it cannot be cancelled.
var ErrJobEnded = errors.New("job already ended")

// JobEndedError says how the job ended, or that it is PUBLISHING: every
// stage completed and its outputs are being published, which a cancel
// does not interrupt (statemachine.JobPublishing).
type JobEndedError struct {
	ID    string
	State sm.JobState
}

func (e *JobEndedError) Error() string {
	if e.State == sm.JobPublishing {
		return fmt.Sprintf("job %s is publishing its outputs: its work is done and it can no longer be cancelled", e.ID)
	}
	return fmt.Sprintf("job %s already %s; only a WAITING or RUNNING job can be cancelled", e.ID, e.State)
}
func (e *JobEndedError) Unwrap() error { return ErrJobEnded }

// CancelReason is the error a cancelled job carries.
const CancelReason = "cancelled by its owner"

// Cancel ends a running job as CANCELLED. Cancelling is idempotent: a
// cancelled job answers as if cancelled now (nil). A job that succeeded
// or failed, or is publishing its outputs, gives a *JobEndedError (409).
//
// What follows from the job's state, checked where each step happens:
// claims on a cancelled job fail and cancel their task, so queued messages
// are dropped when received (a process that read the job RUNNING less than
// JobStateTTL ago may still grant a claim: kernel/jobstate.go); running tasks see
// their context cancelled by their runner's job watch within two
// JobStateTTLs and a read (a remote executor's at their next heartbeat);
// outputs committed before the cancel are kept and
// listed by Outputs. A task that was already past its last heartbeat may
// still commit; its outputs are then listed too, never half-written.
func (s *Operator) Cancel(ctx context.Context, owner, id string) error {
	j, err := s.OwnedJob(ctx, owner, id)
	if err != nil {
		return err
	}
	state := j.State
	if state == sm.JobRunning || state == sm.JobWaiting { // a WAITING job's start then does nothing
		err := s.EndJob(ctx, id, sm.JobCancel, CancelReason, "", s.Now())
		switch {
		case err == nil:
			s.log.Info("job cancelled", "job_id", id)
			state = sm.JobCancelled
		case errors.Is(err, sm.ErrInvalidTransition):
			// It ended meanwhile: by another cancel, or by finishing.
			if state, err = s.store.JobState(ctx, id); err != nil {
				return err
			}
		default:
			return err
		}
	}
	if state != sm.JobCancelled {
		return &JobEndedError{ID: id, State: state}
	}
	// Repeated on every cancel, so a cancel interrupted here is finished by
	// the next one (and by the sweep for stages it has in its index).
	return s.stages.CancelStages(ctx, id, -1)
}
