package kernel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrOverLimit means a concurrency limit is reached: the job already runs
// as many tasks as its maxConcurrency allows, or the job's owner as many
// as its owner limit (Config.OwnerLimits). The task was not claimed and
// spent no attempt; a delayed copy of its message was sent, so the
// executor drops this one (an *OverLimitError also wraps
// domain.ErrAlreadyDone for that reason). Sending a copy rather than hiding
// the message keeps a task that waits long behind the limit from reaching
// the queue's redrive threshold.
var ErrOverLimit = errors.New("over a concurrency limit")

// Slots takes, gives back and frees the concurrency slots of tasks under
// a limit (their job's maxConcurrency, their owner's limit). It is the
// kernel's own, apart so that the kernel's type stays small.
type Slots struct{ *Kernel }

// OverLimitError says which limit refused a claim.
type OverLimitError struct {
	// Limit is "job" (the spec's maxConcurrency) or "owner".
	Limit string
	// Name is the job id or the owner.
	Name string
	// Max is the limit's value.
	Max int
	// RetryIn is the delay of the message's copy.
	RetryIn time.Duration
}

func (e *OverLimitError) Error() string {
	return fmt.Sprintf("%s %s at its concurrency limit of %d; back in %s", e.Limit, e.Name, e.Max, e.RetryIn)
}

// Unwrap makes errors.Is find ErrOverLimit and domain.ErrAlreadyDone.
func (e *OverLimitError) Unwrap() []error { return []error{ErrOverLimit, domain.ErrAlreadyDone} }

const (
	// OverLimitDelay is how long a task over a limit waits before its
	// message comes back (plus jitter, so waiting tasks spread out).
	OverLimitDelay = 2 * time.Second
	// claimWindow bounds the time between taking a slot and claiming: a
	// slot held this long by a task that is still READY was taken by an
	// executor that died before its claim.
	claimWindow = 30 * time.Second
	// reapBatch bounds the task reads one refused claim spends looking for
	// slots whose holders died.
	reapBatch = 10
)

// limit is one concurrency limit a task is subject to.
type Limit struct {
	Slots dynamo.SlotMap
	Kind  string // "job" or "owner"
	name  string
	Max   int
}

// limitsOf lists the limits a job's tasks are subject to: the job's, then
// its owner's. The job's goes first because the owner's map is the busier
// item (it spans jobs): a task of a full job then never touches it.
func (s *Slots) limitsOf(ref domain.TaskRef, m JobMeta) []Limit {
	var ls []Limit
	if n := m.Spec.MaxConcurrency; n > 0 {
		ls = append(ls, Limit{Slots: dynamo.JobSlots(ref.Job), Kind: "job", name: ref.Job, Max: n})
	}
	if n := s.cfg.OwnerLimits.For(m.Owner); n > 0 {
		ls = append(ls, Limit{Slots: dynamo.OwnerSlots(m.Owner), Kind: "owner", name: m.Owner, Max: n})
	}
	return ls
}

// SlotClaim is the slots a claim took and the ones it took over from an
// earlier attempt of its task, so a refused claim gives back exactly
// those. Every one is stamped at; the claim keeps the stamp on its task.
type SlotClaim struct {
	taken []dynamo.SlotMap
	moved []MovedSlot
	At    time.Time
	Any   bool // the task is under a limit
}

// MovedSlot is a held slot restamped from an earlier attempt's stamp.
type MovedSlot struct {
	m    dynamo.SlotMap
	from time.Time
}

// TakeSlots takes the task's slot under each of its limits before its
// claim. Without limits it does nothing (no request). If a limit is
// reached, it gives back what it took, requeues the task and returns an
// *OverLimitError.
func (s *Slots) TakeSlots(ctx context.Context, ref domain.TaskRef, m JobMeta, now time.Time) (SlotClaim, error) {
	sc := SlotClaim{At: now}
	for _, l := range s.limitsOf(ref, m) {
		sc.Any = true
		took, from, err := s.takeSlot(ctx, ref, l, now)
		if err != nil {
			s.ReturnSlots(ctx, ref, sc)
			return SlotClaim{}, err
		}
		if took {
			sc.taken = append(sc.taken, l.Slots)
		} else {
			sc.moved = append(sc.moved, MovedSlot{m: l.Slots, from: from})
		}
	}
	return sc, nil
}

// takeSlot takes ref's slot under one limit, stamped now: true if it took
// a new one, false if it took over the slot the task held (a duplicate
// delivery, or a new attempt after a retry or an expired lease), with
// that slot's earlier stamp. Taking over restamps the slot, so the end of
// the earlier attempt, which frees by its own stamp, cannot free the slot
// of the attempt this claim starts. At the limit it first frees the slots
// of dead holders; if none, it requeues the task and returns an
// *OverLimitError.
func (s *Slots) takeSlot(ctx context.Context, ref domain.TaskRef, l Limit, now time.Time) (bool, time.Time, error) {
	reaped := false
	for {
		out, held, err := s.store.SlotAcquire(ctx, l.Slots, ref, l.Max, now)
		if err != nil {
			return false, time.Time{}, fmt.Errorf("claim %s: %w", ref, err)
		}
		switch out {
		case dynamo.SlotTaken:
			return true, time.Time{}, nil
		case dynamo.SlotHeld:
			if held.Equal(now) {
				return false, held, nil
			}
			moved, err := s.store.SlotRestamp(ctx, l.Slots, ref, held, now)
			if err != nil {
				return false, time.Time{}, fmt.Errorf("claim %s: %w", ref, err)
			}
			if moved {
				return false, held, nil
			}
			continue // freed or taken over meanwhile: look again
		}
		if !reaped {
			reaped = true
			n, err := s.reapSlots(ctx, l.Slots, now)
			if err != nil {
				return false, time.Time{}, fmt.Errorf("claim %s: %w", ref, err)
			}
			if n > 0 {
				continue
			}
		}
		delay := OverLimitDelay + s.Jitter(OverLimitDelay)
		if err := s.Resend(ctx, ref, tracing.SpanID(tracing.Carried(ctx)), delay); err != nil {
			return false, time.Time{}, fmt.Errorf("claim %s: requeue over the %s limit: %w", ref, l.Kind, err)
		}
		s.Logger(ref).Debug("task over a concurrency limit", "limit", l.Kind, "max", l.Max, "retry_in", delay.String())
		return false, time.Time{}, fmt.Errorf("claim %s: %w", ref, &OverLimitError{Limit: l.Kind, Name: l.name, Max: l.Max, RetryIn: delay})
	}
}

// ReturnSlots gives back the slots a refused claim took, and gives the
// ones it took over their earlier stamp back (a duplicate delivery of a
// running task leaves the running attempt's slot as it was). Only those:
// the condition on their stamp keeps a newer one safe.
func (s *Slots) ReturnSlots(ctx context.Context, ref domain.TaskRef, sc SlotClaim) {
	for _, m := range sc.taken {
		if err := s.store.SlotRelease(ctx, m, ref, sc.At); err != nil {
			// Leaked until a refused claim reaps it (its task is not CLAIMED).
			s.Logger(ref).Warn("return concurrency slot", "slots", m.String(), "err", err)
		}
	}
	for _, mv := range sc.moved {
		if _, err := s.store.SlotRestamp(ctx, mv.m, ref, sc.At, mv.from); err != nil {
			s.Logger(ref).Warn("restore concurrency slot", "slots", mv.m.String(), "err", err)
		}
	}
}

// FreeSlots frees ref's slots when an attempt has ended (committed,
// failed, expired), only if they still carry that attempt's stamp at
// (domain.Task.SlotAt). A newer attempt that took the slot over has
// restamped it and keeps it. Zero frees whatever the stamp: for a task
// that ended for good, no attempt can hold a slot any more. sp is the job's
// spec if the caller has it. Without limits it does nothing, and costs no
// request: the job and owner are cached. A failure only delays a slot: it
// is reaped once a claim finds the map full.
func (s *Slots) FreeSlots(ctx context.Context, ref domain.TaskRef, sp *spec.Job, at time.Time) {
	if sp != nil && sp.MaxConcurrency <= 0 && !s.cfg.OwnerLimits.Any() {
		return
	}
	m, err := s.Meta(ctx, ref.Job)
	if err != nil {
		s.Logger(ref).Warn("free concurrency slots", "err", err)
		return
	}
	for _, l := range s.limitsOf(ref, m) {
		if err := s.store.SlotRelease(ctx, l.Slots, ref, at); err != nil {
			s.Logger(ref).Warn("free concurrency slot", "slots", l.Slots.String(), "err", err)
		}
	}
}

// reapSlots frees the slots in m of the oldest holders that no longer
// run: a task that ended, one whose lease expired (its executor died; a
// reclaim takes a slot again), and one still READY long after taking its
// slot (its executor died before the claim). Each release is conditional
// on the slot's time, so a slot taken again meanwhile is kept.
func (s *Slots) reapSlots(ctx context.Context, m dynamo.SlotMap, now time.Time) (int, error) {
	holders, err := s.store.SlotHolders(ctx, m)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range dynamo.OldestHolders(holders, reapBatch) {
		at := holders[ref]
		t, err := s.store.TaskGet(ctx, ref)
		switch {
		case errors.Is(err, domain.ErrNotFound) && now.Sub(at) > claimWindow:
			// Unwritten (sm.TaskUnwritten) as long after its slot as a
			// READY task, or its job's records are gone.
		case errors.Is(err, domain.ErrNotFound):
			continue // its claim may be writing it now
		case err != nil:
			return n, err
		case sm.Tasks.IsTerminal(t.State):
		case t.State == sm.TaskClaimed && now.After(t.LeaseUntil):
		case t.State == sm.TaskReady && now.Sub(at) > claimWindow:
		default:
			continue // running
		}
		if err := s.store.SlotRelease(ctx, m, ref, at); err != nil {
			return n, err
		}
		s.Logger(ref).Info("freed the concurrency slot of a task that no longer runs", "slots", m.String())
		n++
	}
	return n, nil
}

// JobLimits are the concurrency limits j's tasks run under, as the read
// side shows them: the job's own, then its owner's.
func (s *Kernel) JobLimits(j domain.Job) []Limit {
	return s.Slots.limitsOf(domain.TaskRef{Job: j.ID}, JobMeta{Spec: j.Spec, Owner: j.Owner})
}
