package tasks

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An owner's cancel of one task (operations.Operator.CancelTask) is a
// failure like a holder's permanent one, decided by the owner instead of
// the attempt: the task fails as domain.ClassCancelled whatever attempts
// it has left, within its stage's toleratedFailures allowance when there
// is room, and otherwise fails its stage and job with the cancel's
// reason. The write (dynamo.Store.TaskCancel) ends every claim on the
// task, so the cancelled attempt is fenced like any other that lost its
// claim; its heartbeat learns why (cancelledHeartbeat) and its executor
// stops the function.

// CancelParams is an owner's cancel of one task.
type CancelParams struct {
	Ref  domain.TaskRef
	Spec *spec.Job
	// Owner is the job's; Reason the task's error, which a job that
	// fails with it carries ("task map/3 cancelled by ...").
	Owner, Reason string
	// Before is the task as the canceller read it: a running attempt's
	// history records its end with its executor.
	Before domain.Task
	// MaxAttempts, for a stage whose tasks are not written at
	// materialization, writes a task that has no record yet
	// (dynamo.TaskCancelParams).
	MaxAttempts int
}

// CancelOne fails p.Ref as cancelled by its owner and carries the
// failure on (the job's failure, or the stage's completion check). A
// repeat finds the first cancel's task and only finishes its follow-up,
// so a cancel interrupted after its write is finished by the next (and by
// the sweep, which has the task in its index until then).
// domain.ErrAlreadyDone: the task committed first.
func (s *Lifecycle) CancelOne(ctx context.Context, p CancelParams) (domain.Task, error) {
	now := s.Now()
	failed := kernel.TaskFailedEvent(p.Ref, p.Owner, p.Spec, p.Before.Attempt, p.Reason, now) // kernel/events.go
	cp := dynamo.TaskCancelParams{Ref: p.Ref, Now: now, Err: p.Reason, MaxAttempts: p.MaxAttempts, Due: now, Outbox: failed}
	allowed, shards, err := s.allowance(ctx, p.Spec, p.Ref) // tolerate.go
	if err != nil {
		return domain.Task{}, err
	}
	cp.Allowed, cp.Shards = allowed, shards
	t, err := s.store.TaskCancel(ctx, cp)
	if errors.Is(err, dynamo.ErrNotTolerated) {
		cp.Allowed = 0
		t, err = s.store.TaskCancel(ctx, cp)
	}
	if err != nil {
		return t, err
	}
	if t.Updated.Equal(time.UnixMilli(now.UnixMilli())) && t.LastError == p.Reason {
		// This cancel's write, not an earlier one's.
		s.PublishEvents(ctx, failed.ID)
		s.Slots.FreeSlots(ctx, p.Ref, p.Spec, time.Time{}) // ended: whatever attempt's
		s.TaskLog(ctx, p.Ref, t.Attempt).Warn("task cancelled by its owner", "tolerated", t.Tolerated)
		if b := p.Before; b.State == sm.TaskClaimed {
			// Every live claim's attempt ended: the holder's, and a
			// speculative copy's, which took the record's attempt number
			// (speculation.go).
			kind := attemptKind(t, domain.AttemptCancelled)
			if c := b.Copy; c != nil && c.Live() {
				s.NoteAttemptEnd(ctx, p.Ref, c.HolderAttempt, kind, p.Reason, b)
				s.NoteAttemptEnd(ctx, p.Ref, c.Attempt, kind, p.Reason, domain.Task{})
			} else {
				s.NoteAttemptEnd(ctx, p.Ref, holderAttempt(b), kind, p.Reason, b)
			}
		}
		s.Meter().TaskFailed(s.TaskPriority(ctx, p.Spec, p.Ref)) // kernel/metrics.go
	}
	return t, s.propagateFailure(ctx, t)
}

// cancelledHeartbeat tells a heartbeat refused because the task's owner
// cancelled it (domain.ErrTaskCancelled, with the refusal) from any other
// stale claim: the executor then stops the attempt as it stops one whose
// job ended. One read, only on a refused heartbeat.
func cancelledHeartbeat(ctx context.Context, store Store, ref domain.TaskRef, err error) error {
	if !errors.Is(err, domain.ErrStaleClaim) {
		return err
	}
	t, gerr := store.TaskGet(ctx, ref)
	if gerr == nil && t.State == sm.TaskFailed && t.ErrorClass == domain.ClassCancelled {
		return fmt.Errorf("%w: %w", domain.ErrTaskCancelled, err)
	}
	return err
}
