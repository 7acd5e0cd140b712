package control

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrOverLimit means the job already runs as many tasks as its
// maxConcurrency allows. The task was not claimed and spent no attempt; a
// delayed copy of its message was sent, so the executor drops this one
// (the error also wraps batch.ErrAlreadyDone for that reason). Sending a
// copy rather than hiding the message keeps a task that waits long behind
// the limit from reaching the queue's redrive threshold.
var ErrOverLimit = errors.New("job at its concurrency limit")

const (
	// overLimitDelay is how long a task over its job's limit waits before
	// its message comes back (plus jitter, so waiting tasks spread out).
	overLimitDelay = 2 * time.Second
	// claimWindow bounds the time between taking a slot and claiming: a
	// slot held this long by a task that is still READY was taken by an
	// executor that died before its claim.
	claimWindow = 30 * time.Second
	// reapBatch bounds the task reads one refused claim spends looking for
	// slots whose holders died.
	reapBatch = 10
)

// slotClaim is the slot a claim took, if it took a new one.
type slotClaim struct {
	taken bool
	at    time.Time
}

// takeSlot takes a concurrency slot for ref before its claim. Without a
// limit it does nothing (no request). At the limit it first frees the
// slots of dead holders; if none, it requeues the task and returns
// ErrOverLimit.
func (s *Service) takeSlot(ctx context.Context, ref batch.TaskRef, sp *spec.Job, now time.Time) (slotClaim, error) {
	if sp.MaxConcurrency <= 0 {
		return slotClaim{}, nil
	}
	for try := 0; ; try++ {
		out, err := s.store.AcquireSlot(ctx, ref, sp.MaxConcurrency, now)
		if err != nil {
			return slotClaim{}, fmt.Errorf("claim %s: %w", ref, err)
		}
		switch out {
		case dynamo.SlotTaken:
			return slotClaim{taken: true, at: now}, nil
		case dynamo.SlotHeld:
			// A duplicate delivery or a reclaim: the task's slot is its
			// own, and stays with the task whatever this claim finds.
			return slotClaim{}, nil
		}
		if try == 0 {
			n, err := s.reapSlots(ctx, ref.Job, now)
			if err != nil {
				return slotClaim{}, fmt.Errorf("claim %s: %w", ref, err)
			}
			if n > 0 {
				continue
			}
		}
		delay := overLimitDelay + s.Jitter(overLimitDelay)
		if err := s.resend(ctx, ref, delay); err != nil {
			return slotClaim{}, fmt.Errorf("claim %s: requeue over the limit: %w", ref, err)
		}
		s.logger(ref).Debug("task over its job's concurrency limit", "limit", sp.MaxConcurrency, "retry_in", delay.String())
		return slotClaim{}, fmt.Errorf("claim %s: %w of %d; back in %s: %w", ref, ErrOverLimit, sp.MaxConcurrency, delay, batch.ErrAlreadyDone)
	}
}

// returnSlot gives back the slot a refused claim took. Only that slot:
// the condition on its time keeps a newer one safe.
func (s *Service) returnSlot(ctx context.Context, ref batch.TaskRef, sc slotClaim) {
	if !sc.taken {
		return
	}
	if err := s.store.ReleaseSlot(ctx, ref, sc.at); err != nil {
		// Leaked until a refused claim reaps it (its task is not CLAIMED).
		s.logger(ref).Warn("return concurrency slot", "err", err)
	}
}

// freeSlot frees ref's slot when its attempt has ended (committed, failed,
// expired). Without a limit it does nothing. A failure only delays the
// slot: it is reaped once a claim finds the job full.
func (s *Service) freeSlot(ctx context.Context, ref batch.TaskRef, sp *spec.Job) {
	if sp == nil || sp.MaxConcurrency <= 0 {
		return
	}
	if err := s.store.ReleaseSlot(ctx, ref, time.Time{}); err != nil {
		s.logger(ref).Warn("free concurrency slot", "err", err)
	}
}

// reapSlots frees the slots of the oldest holders that no longer run: a
// task that ended, one whose lease expired (its executor died; a reclaim
// takes a slot again), and one still READY long after taking its slot
// (its executor died before the claim). Each release is conditional on
// the slot's time, so a slot taken again meanwhile is kept.
func (s *Service) reapSlots(ctx context.Context, job string, now time.Time) (int, error) {
	holders, err := s.store.SlotHolders(ctx, job)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ref := range dynamo.OldestHolders(holders, reapBatch) {
		at := holders[ref]
		t, err := s.store.GetTask(ctx, ref)
		switch {
		case errors.Is(err, batch.ErrNotFound):
		case err != nil:
			return n, err
		case sm.Tasks.IsTerminal(t.State):
		case t.State == sm.TaskClaimed && now.After(t.LeaseUntil):
		case t.State == sm.TaskReady && now.Sub(at) > claimWindow:
		default:
			continue // running
		}
		if err := s.store.ReleaseSlot(ctx, ref, at); err != nil {
			return n, err
		}
		s.logger(ref).Info("freed the concurrency slot of a task that no longer runs")
		n++
	}
	return n, nil
}

// freeSlotOf is freeSlot for a caller without the spec at hand (the
// sweep, on a lease it expired). The spec is cached, so a job without a
// limit costs no request here either once the spec was read.
func (s *Service) freeSlotOf(ctx context.Context, ref batch.TaskRef) {
	sp, err := s.jobSpec(ctx, ref.Job)
	if err != nil {
		s.logger(ref).Warn("free concurrency slot", "err", err)
		return
	}
	s.freeSlot(ctx, ref, sp)
}
