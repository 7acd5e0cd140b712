package tasks

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// Tolerated failures (spec Stage.ToleratedFailures, issue 13.3): a task
// that fails for good in a stage with an allowance counts as finished
// for its stage when the allowance has room. The task's FAILED transition,
// the countdown of its completion shard and the stage's count of
// tolerated failures (guarded: count < allowance) are one transaction
// (dynamo.FailTolerated), so the stage completes without the task exactly
// when the allowance covers it, and concurrent failures never pass it.
// Past the allowance the task fails the ordinary way, and its job with it.

// allowance is how many failed tasks the stage of ref tolerates (0:
// none) and its counter count. It reads the stage only when the spec
// has an allowance: a failure in a stage without one costs nothing more.
func (s *Lifecycle) allowance(ctx context.Context, sp *spec.Job, ref domain.TaskRef) (allowed, shards int, err error) {
	if sp == nil || ref.Stage >= len(sp.Stages) || sp.Stages[ref.Stage].ToleratedFailures == nil {
		return 0, 0, nil
	}
	st, err := s.store.StageGet(ctx, ref.Job, ref.Stage)
	if err != nil {
		return 0, 0, fmt.Errorf("tolerate failure of %s: %w", ref, err)
	}
	return sp.Stages[ref.Stage].ToleratedFailures.Allowed(st.Total), st.Shards, nil
}

// tolerate tries to fail the task within its stage's allowance. ok=false
// (and no error) means the stage tolerates no more (or none at all): the
// caller fails the task the ordinary way.
func (s *Lifecycle) tolerate(ctx context.Context, sp *spec.Job, p dynamo.TolerateParams) (t domain.Task, ok bool, err error) {
	allowed, shards, err := s.allowance(ctx, sp, p.Ref)
	if err != nil || allowed == 0 {
		return domain.Task{}, false, err
	}
	p.Allowed, p.Shards = allowed, shards
	t, err = s.store.TaskFailTolerated(ctx, p)
	if errors.Is(err, dynamo.ErrNotTolerated) {
		return domain.Task{}, false, nil
	}
	if err != nil {
		return domain.Task{}, false, err
	}
	s.TaskLog(ctx, p.Ref, t.Attempt).Warn("task failed; its stage tolerates the failure", "allowed", allowed, "err", p.Err)
	return t, true, nil
}

// releaseFailed is store.ReleaseTask for the holder's final failure
// (sm.TaskFail, sm.TaskFailPermanent), tolerated by the task's stage when
// its allowance has room.
func (s *Lifecycle) releaseFailed(ctx context.Context, sp *spec.Job, p dynamo.ReleaseParams) (domain.Task, error) {
	if !p.Class.Tolerable() {
		return s.store.TaskRelease(ctx, p)
	}
	t, ok, err := s.tolerate(ctx, sp, dynamo.TolerateParams{
		Ref: p.Ref, Event: p.Event, Token: p.Token, Now: p.Now, Err: p.Err, Class: p.Class, Due: p.Due, Outbox: p.Outbox,
	})
	if ok || err != nil {
		return t, err
	}
	return s.store.TaskRelease(ctx, p)
}

// sweepFailed is store.SweepTask for a task whose last lease expired
// (sm.TaskExhaust), tolerated by its stage when its allowance has room.
// tolerated says which happened.
func (s *Lifecycle) sweepFailed(ctx context.Context, sp *spec.Job, p dynamo.SweepTaskParams) (tolerated bool, err error) {
	_, ok, err := s.tolerate(ctx, sp, dynamo.TolerateParams{
		Ref: p.Ref, Event: p.Event, Now: p.Now, Err: p.Err, Class: p.Class, Due: p.Due, Outbox: p.Outbox,
	})
	if ok || err != nil {
		return ok, err
	}
	return false, s.store.TaskSweep(ctx, p)
}

// afterTolerated is the follow-up of a tolerated failure: like a commit's,
// the stage completes if this was its last unfinished task. The task
// stays in the sweep index until this is done, so a crash before it is
// finished by the sweep.
func (s *Lifecycle) afterTolerated(ctx context.Context, t domain.Task) error {
	// A tolerated failure counts its shard down as a commit does: when
	// that emptied it, the stage's set of emptied shards must say so, or
	// the count that empties the last shard would not see the set full
	// and would leave the completion to the stage's next check.
	if err := s.noteIfEmptied(ctx, t.Ref); err != nil {
		return err
	}
	if err := s.stages.CheckStageComplete(ctx, t.Ref.Job, t.Ref.Stage); err != nil {
		return err
	}
	return s.store.TaskUnindex(ctx, t)
}

// overAllowance prefixes the job's error for a failure its stage did not
// tolerate (past its allowance) with the stage's count: "stage "b": 3 tasks failed, 2
// tolerated; ...". A stage without an allowance keeps the plain reason.
func (s *Lifecycle) overAllowance(ctx context.Context, sp *spec.Job, t domain.Task, reason string) string {
	// A failure no allowance covers (an input that changed) did not pass
	// the allowance: counting it against it would say it had.
	if t.Ref.Stage >= len(sp.Stages) || sp.Stages[t.Ref.Stage].ToleratedFailures == nil || !t.ErrorClass.Tolerable() {
		return reason
	}
	st, err := s.store.StageGet(ctx, t.Ref.Job, t.Ref.Stage)
	if err != nil {
		return reason
	}
	allowed := sp.Stages[t.Ref.Stage].ToleratedFailures.Allowed(st.Total)
	return fmt.Sprintf("stage %q: %d tasks failed, %d tolerated; %s", sp.Stages[t.Ref.Stage].Name, st.Tolerated+1, allowed, reason)
}

// attemptKind is the history kind of a task's final failed attempt: a
// tolerated one says so.
func attemptKind(t domain.Task, kind domain.AttemptEndKind) domain.AttemptEndKind {
	if t.Tolerated {
		return domain.AttemptTolerated
	}
	return kind
}

// noteIfEmptied adds ref's counter shard to its stage's set of emptied
// shards when it is empty (a path that counts down without learning
// whether it emptied the shard).
func (s *Lifecycle) noteIfEmptied(ctx context.Context, ref domain.TaskRef) error {
	shards, err := s.StageShards(ctx, ref.Job, ref.Stage)
	if err != nil {
		return err
	}
	shard := dynamo.ShardOf(ref.Partition, shards)
	left, err := s.store.ShardLeft(ctx, ref.Job, ref.Stage, shard)
	if err != nil || left > 0 {
		return err
	}
	_, err = s.store.ShardEmptied(ctx, ref.Job, ref.Stage, shard)
	return err
}
