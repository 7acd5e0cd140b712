package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrNoCheckpoints: a control plane cannot record checkpoints. The
// Lifecycle always can; a ControlPlane that is not control.Service (a
// test's) answers it.
var ErrNoCheckpoints = errors.New("this control plane cannot record checkpoints")

// Checkpoint points c's task at checkpoint seq of c's attempt, whose
// record and output segments the executor has already written to S3
// (blob.CheckpointKey). The write is fenced by the claim token: a stale
// attempt gets domain.ErrStaleClaim and must stop, and its checkpoint is
// never resumed from.
//
// A speculative copy's checkpoint is fenced by its own token, as the
// holder's is by its. A task record has one checkpoint pointer, the
// holder's: while the holder runs beside its copy, the copy's checkpoint
// is not recorded (nil: a documented no-op, which never moves the
// pointer off the holder's checkpoint; the copy started from the
// holder's last one). Once the holder yielded to the copy (it failed
// beside it: sm.TaskYield), the copy's token is the task's, and its
// checkpoints are recorded as any holder's: a retry after the copy fails
// resumes from them. A copy that lost its claim gets domain.ErrStaleClaim.
func (s *Lifecycle) Checkpoint(ctx context.Context, c kernel.Claim, seq int, offset int64) error {
	ref := c.Task.Ref
	err := s.store.TaskCheckpoint(ctx, dynamo.CheckpointParams{
		HolderParams: dynamo.HolderParams{Ref: ref, Token: c.Task.Token, Now: s.Now()},
		Attempt:      c.Task.Attempt, Seq: seq, Offset: offset,
	})
	if c.Speculative && errors.Is(err, domain.ErrStaleClaim) {
		t, gerr := s.store.TaskGet(ctx, ref)
		if gerr != nil {
			return fmt.Errorf("checkpoint copy of task %s: %w", ref, gerr)
		}
		if t.State == sm.TaskClaimed && t.Copy.Live() && t.Copy.Token == c.Task.Token {
			s.TaskLog(ctx, ref, c.Task.Attempt).Debug("copy's checkpoint not recorded beside its holder", "seq", seq, "offset", offset)
			return nil
		}
	}
	if err != nil {
		return err
	}
	s.TaskLog(ctx, ref, c.Task.Attempt).Debug("task checkpointed", "seq", seq, "offset", offset)
	return nil
}

// Continue hands c's checkpointed task on to a new invocation
// (sm.TaskContinue): back to READY at once, without spending an attempt,
// its attempt history saying where it continues. The task gets a fresh
// message: Decision.Retry is false and the executor drops the old one;
// true (the send failed) means keep the old one, visible at once. It needs a checkpoint
// of c's own attempt and a continuation left (sm.MaxContinuations);
// otherwise the error wraps sm.ErrInvalidTransition and the caller fails
// the attempt as any other (a retry resumes from the last checkpoint).
func (s *Lifecycle) Continue(ctx context.Context, c kernel.Claim, offset int64) (Decision, error) {
	ref := c.Task.Ref
	now := s.Now()
	msg := fmt.Sprintf("continued in a new invocation at offset %d", offset)
	t, err := s.store.TaskContinue(ctx, dynamo.ContinueParams{
		HolderParams: dynamo.HolderParams{Ref: ref, Token: c.Task.Token, Now: now},
		Msg:          msg, Due: now.Add(s.cfg.StuckAfter),
		Attempt: c.Task.Attempt, Continuations: c.Task.Checkpoint.Continuations,
	})
	if err != nil {
		return Decision{}, err
	}
	s.Slots.FreeSlots(ctx, ref, c.Spec, c.Task.SlotAt)
	s.TaskLog(ctx, ref, c.Task.Attempt).Info("task continues in a new invocation", "offset", offset,
		"continuations", t.Checkpoint.Continuations)
	// A fresh message, so that a task's continuations do not add up to
	// its message's receive count and dead-letter it (tuning.MaxReceiveCount);
	// when the send fails, the caller keeps the old message instead.
	sent := s.Resend(ctx, ref, c.Task.TraceSpan, 0) == nil // kernel/sizedqueues.go
	// History, not a failure: no stage failure count (Shards 0).
	if _, err := s.store.AttemptRecordEnd(ctx, dynamo.AttemptEndParams{
		End: kernel.AttemptEnd(ref, c.Task.Attempt, domain.AttemptContinued, now, msg, c.Task),
	}); err != nil {
		s.Logger(ref).Warn("record attempt end", "attempt", c.Task.Attempt, "kind", domain.AttemptContinued, "err", err)
	}
	return Decision{Retry: !sent}, nil
}

// NoteResumed puts on the job's timeline that c's attempt resumed from
// its task's checkpoint. Best effort: history, never state.
func (s *Lifecycle) NoteResumed(ctx context.Context, c kernel.Claim) {
	ck := c.Task.Checkpoint
	ref := c.Task.Ref
	msg := fmt.Sprintf("resumed from the checkpoint of attempt %d at offset %d", ck.Attempt, ck.Offset)
	if err := s.store.TimelineRecord(ctx, domain.AttemptEnd{Ref: ref, Attempt: c.Task.Attempt, Kind: domain.TaskResumed, At: s.Now(), Err: msg}); err != nil {
		s.Logger(ref).Warn("record resume", "attempt", c.Task.Attempt, "err", err)
	}
}
