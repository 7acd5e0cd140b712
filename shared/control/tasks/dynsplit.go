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
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Dynamic splitting (spec Input.DynamicSplit): a running input task that
// straggles gives away the unread rest of its byte range as new tasks of
// its stage.
//
// The holder's executor decides (executor/dynsplit.go): it alone knows
// how far its reader has got, and the cut has to lie past that point, so
// it proposes the cut and holds its reader back there until this call has
// answered. The control plane checks and records the split in one
// transaction (dynamo.SplitTask) and sends the new tasks' messages.

// MaxSplitPieces bounds the tasks one split adds: each is a put in the
// split's transaction, next to a counter update per shard it lands in.
const MaxSplitPieces = 8

// ErrSplitRefused: see dynamo.ErrSplitRefused.
var ErrSplitRefused = dynamo.ErrSplitRefused

// SplitRequest is a holder's offer to give away [At, Input.End) of its
// split, as Give, which tiles that range.
type SplitRequest struct {
	// Input is the split the holder reads (its claim's).
	Input split.Split
	At    int64
	Give  []split.Split
	// Ran is how long the holder's attempt has run.
	Ran time.Duration
}

// SplitResult names the tasks a split added: partitions First..Last.
type SplitResult struct{ First, Last int }

// SplitTask records a split offered by the holder of claim c, then sends
// the new tasks' messages. A refusal (ErrSplitRefused) leaves the holder
// to read its whole range; bad requests are errors naming the problem.
func (s *Lifecycle) SplitTask(ctx context.Context, c kernel.Claim, req SplitRequest) (SplitResult, error) {
	ref := c.Task.Ref
	// Nothing is written before the store's transaction, so a failure up
	// to it (a bad offer, a failed read) is a refusal: any other error
	// tells the holder the outcome is unknown, and it gives up its attempt.
	if err := checkSplit(c, req); err != nil {
		return SplitResult{}, fmt.Errorf("split task %s: %w", ref, refused(err))
	}
	if err := s.checkStraggler(ctx, ref, req.Ran); err != nil {
		return SplitResult{}, fmt.Errorf("split task %s: %w", ref, refused(err))
	}
	m, err := s.Meta(ctx, ref.Job)
	if err != nil {
		return SplitResult{}, fmt.Errorf("split task %s: %w", ref, refused(err))
	}
	now := s.Now()
	given := req.Input.End - req.At
	first, err := s.store.TaskSplit(ctx, dynamo.SplitTaskParams{
		Ref: ref, Token: c.Task.Token, Attempt: c.Task.Attempt,
		Input: req.Input, At: req.At, Give: req.Give,
		MaxAttempts: c.Spec.StageRetry(ref.Stage).MaxAttempts, MaxTotal: spec.MaxPartitions,
		MaxQuotaTasks: s.cfg.TaskQuota.For(m.Owner),
		Now:           now, Due: now.Add(s.cfg.StuckAfter),
		Message: func(first, last int) string {
			return fmt.Sprintf("split at byte %d of %s: gave %d bytes to tasks %d..%d", req.At, req.Input.Key, given, first, last)
		},
	})
	if err != nil {
		return SplitResult{}, err
	}
	res := SplitResult{First: first, Last: first + len(req.Give) - 1}
	msgs := make([]queue.Send, 0, len(req.Give))
	for p := res.First; p <= res.Last; p++ {
		msgs = append(msgs, queue.Send{Body: domain.TaskRef{Job: ref.Job, Stage: ref.Stage, Partition: p}.String()})
	}
	// The tasks exist: a lost send is the sweep's to repair (their due
	// entries), as for a materialization that crashed after its puts.
	if err := s.queue.SendBatch(ctx, s.StageQueue(c.Spec, ref.Stage), msgs); err != nil {
		s.Logger(ref).Warn("split: send the new tasks' messages", "err", err)
	}
	s.Logger(ref).Info("task split", "attempt", c.Task.Attempt, "at", req.At, "gave_bytes", given, "first", res.First, "last", res.Last)
	return res, nil
}

// refused makes err, from a split that wrote nothing, a refusal.
func refused(err error) error {
	if errors.Is(err, ErrSplitRefused) {
		return err
	}
	return fmt.Errorf("%w: %w", err, ErrSplitRefused)
}

// checkSplit checks a split request against the claim and the spec.
func checkSplit(c kernel.Claim, req SplitRequest) error {
	st := c.Spec.Stages[c.Task.Ref.Stage]
	in := c.Task.Input
	switch {
	case c.Speculative:
		return fmt.Errorf("a speculative copy does not split: %w", ErrSplitRefused)
	case in == nil || st.Partitions.InputAt(in.Source) == nil || !st.Partitions.InputAt(in.Source).DynamicSplit:
		return fmt.Errorf("stages[%d].partitions.input.dynamicSplit is not set: %w", c.Task.Ref.Stage, ErrSplitRefused)
	case st.Lambda != "":
		return fmt.Errorf("a lambda stage reads its input itself: %w", ErrSplitRefused)
	case in == nil || req.Input.Key != in.Key || req.Input.Start != in.Start || req.Input.ETag != in.ETag || req.Input.Version != in.Version || req.Input.Source != in.Source:
		return errors.New("the split offered is not the claimed task's input")
	case split.Compression(in.Key) != "":
		return fmt.Errorf("compressed input %s is read whole: %w", in.Key, ErrSplitRefused)
	case len(req.Give) == 0 || len(req.Give) > MaxSplitPieces:
		return fmt.Errorf("%d pieces offered; want 1 to %d", len(req.Give), MaxSplitPieces)
	case req.At <= req.Input.Start || req.At >= req.Input.End:
		return fmt.Errorf("cut at %d outside the split [%d, %d)", req.At, req.Input.Start, req.Input.End)
	}
	next := req.At
	for _, p := range req.Give {
		if p.Key != req.Input.Key || p.ETag != req.Input.ETag || p.Version != req.Input.Version || p.Source != req.Input.Source || p.Start != next || p.End <= p.Start {
			return fmt.Errorf("the pieces offered do not tile [%d, %d) of %s", req.At, req.Input.End, req.Input.Key)
		}
		next = p.End
	}
	if next != req.Input.End {
		return fmt.Errorf("the pieces offered end at %d, not at the split's end %d", next, req.Input.End)
	}
	return nil
}

// SplitMultiplier is how many times its stage's median committed attempt
// a task must have run to count as a straggler that may split: the
// speculation default (spec.Speculation), for the same reason.
const SplitMultiplier = 1.5

// checkStraggler refuses a split of a task that is no straggler: it has
// run no longer than SplitMultiplier times the stage's median. A stage
// with no committed attempts yet has no median: a task that has run as
// long as the executor waits before offering (executor.SplitAfter) with
// nothing of its stage committed is behind by any measure.
func (s *Lifecycle) checkStraggler(ctx context.Context, ref domain.TaskRef, ran time.Duration) error {
	shards, err := s.StageShards(ctx, ref.Job, ref.Stage)
	if err != nil {
		return err
	}
	d, err := s.store.StageDurations(ctx, ref.Job, ref.Stage, shards)
	if err != nil {
		return err
	}
	if median := d.Median(); median > 0 && !sm.IsStraggler(ran, median, SplitMultiplier) {
		return fmt.Errorf("ran %s, not over %.1f times the stage's median %s: %w", ran.Round(time.Millisecond), SplitMultiplier, median.Round(time.Millisecond), ErrSplitRefused)
	}
	return nil
}
