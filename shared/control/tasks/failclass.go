package tasks

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// FailParams is how an attempt failed: its error's message and class.
type FailParams struct {
	Cause string
	// Class decides what follows (domain.ErrorClass): a permanent error
	// fails the task at once; an out-of-memory end retries on the next
	// executor size up; anything else retries while attempts are left.
	// Empty means domain.ClassError.
	Class domain.ErrorClass
}

// attemptKinds is the history kind of an attempt that ended with each
// class; a plain error's depends on whether the task retries.
var attemptKinds = map[domain.ErrorClass]domain.AttemptEndKind{
	domain.ClassPermanent:    domain.AttemptPermanent,
	domain.ClassInputChanged: domain.AttemptPermanent,
	domain.ClassTimedOut:     domain.AttemptTimedOut,
	domain.ClassOutOfMemory:  domain.AttemptOutOfMemory,
	domain.ClassCancelled:    domain.AttemptCancelled,
}

// Fail records the holder's failed attempt by its class. A permanent
// error fails the task, its stage and its job at once (sm.TaskFailPermanent),
// whatever attempts are left. Otherwise, with attempts left, the task goes
// back to READY after an exponential backoff with jitter (an out-of-memory
// attempt's retry on the next executor size up, within the stage's
// maxMemory); without, the task fails with its error.
func (s *Lifecycle) Fail(ctx context.Context, c kernel.Claim, p FailParams) (Decision, error) {
	if d, done, err := s.copies.failBesideCopy(ctx, c, p.Cause); done { // speculation.go
		return d, err
	}
	class := cmp.Or(p.Class, domain.ClassError)
	if !class.Valid() {
		return Decision{}, fmt.Errorf("fail %s: unknown error class %q", c.Task.Ref, class)
	}
	ref := c.Task.Ref
	cause := p.Cause
	now := s.Now()
	s.spendAttempt(c, now) // cost.go
	hp := dynamo.HolderParams{Ref: ref, Token: c.Task.Token, Now: now}
	if !class.Permanent() && c.Task.Attempt < c.Task.MaxAttempts {
		delay := s.backoff(c.Spec, ref.Stage, c.Task.Attempt)
		rp := dynamo.ReleaseParams{
			HolderParams: hp, Event: sm.TaskRetry, NotBefore: now.Add(delay), Class: class,
			Due: now.Add(delay + s.cfg.StuckAfter),
		}
		var mem spec.Size
		if class == domain.ClassOutOfMemory {
			var note string
			mem, note = kernel.Escalate(c)
			rp.Memory = mem
			cause = note + ": " + cause
		}
		cause = kernel.Truncate(cause, kernel.MaxErrorLen)
		rp.Err = cause
		if _, err := s.store.TaskRelease(ctx, rp); err != nil {
			return Decision{}, err
		}
		s.Slots.FreeSlots(ctx, ref, c.Spec, c.Task.SlotAt)
		s.TaskLog(ctx, ref, c.Task.Attempt).Warn("task failed, will retry", "delay", delay.String(), "class", string(class), "err", cause)
		s.NoteAttemptEnd(ctx, ref, c.Task.Attempt, cmp.Or(attemptKinds[class], domain.AttemptRetried), cause, c.Task)
		s.Meter().TaskRetried(s.TaskPriority(ctx, c.Spec, ref)) // kernel/metrics.go
		return Decision{Retry: true, Delay: delay, Memory: mem}, nil
	}
	cause = kernel.Truncate(cause, kernel.MaxErrorLen)
	ev := sm.TaskFail
	if class.Permanent() {
		ev = sm.TaskFailPermanent
	}
	meta, err := s.Meta(ctx, ref.Job)
	if err != nil {
		return Decision{}, err
	}
	failed := kernel.TaskFailedEvent(ref, meta.Owner, c.Spec, c.Task.Attempt, cause, now) // kernel/events.go
	t, err := s.releaseFailed(ctx, c.Spec, dynamo.ReleaseParams{HolderParams: hp, Event: ev, Err: cause, Class: class, Due: now,
		Outbox: failed}) // tolerate.go
	if err != nil {
		return Decision{}, err
	}
	s.PublishEvents(ctx, failed.ID)
	s.Slots.FreeSlots(ctx, ref, c.Spec, time.Time{}) // ended: whatever attempt's
	s.TaskLog(ctx, ref, c.Task.Attempt).Warn("task failed", "class", string(class), "err", cause)
	// The claim's own attempt: a copy that ended beside it took the
	// record's attempt number (speculation.go).
	s.NoteAttemptEnd(ctx, ref, c.Task.Attempt, attemptKind(t, cmp.Or(attemptKinds[class], domain.AttemptFailed)), cause, c.Task)
	s.Meter().TaskFailed(s.TaskPriority(ctx, c.Spec, ref)) // kernel/metrics.go
	return Decision{}, s.propagateFailure(ctx, t)
}

// failReason is the stage's and job's error for a task that failed for
// good: which task, after how many attempts, and its error (whose message
// already says a timeout or an out-of-memory end).
func failReason(sp *spec.Job, t domain.Task) string {
	name := sp.Stages[t.Ref.Stage].Name
	if t.ErrorClass == domain.ClassCancelled {
		return t.LastError // names the task and who cancelled it (ownercancel.go)
	}
	if t.ErrorClass.Permanent() {
		return fmt.Sprintf("stage %q task %d failed with a permanent error on attempt %d of %d: %s", name, t.Ref.Partition, t.Attempt, t.MaxAttempts, t.LastError)
	}
	return fmt.Sprintf("stage %q task %d failed after %d attempts: %s", name, t.Ref.Partition, t.Attempt, t.LastError)
}
