package kernel

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A job's generation is its redrive count: a redrive reopens a FAILED
// job, so a decision to fail the job (or cancel its stages) taken by a
// process that read it before the redrive is about the generation that
// already ended. Such writes carry the count they were decided at and
// hold only while it is still the job's (dynamo.StageTransitionParams.
// Redrives, dynamo.Store.EndJobGen), so a late process never ends, or
// cancels the stages of, the redriven job for a stale reason.

// RedriveGen is gen, or when gen < 0 the job's redrive count now.
func (s *Kernel) RedriveGen(ctx context.Context, job string, gen int) (int, error) {
	if gen >= 0 {
		return gen, nil
	}
	n, err := s.store.JobRedriveCount(ctx, job)
	if err != nil {
		return 0, fmt.Errorf("job %s: %w", job, err)
	}
	return n, nil
}

// GenRef is the guard of a write decided at gen (nil: none).
func GenRef(gen int) *int {
	if gen < 0 {
		return nil
	}
	return &gen
}

// FailureGen says at which redrive count the failure of t (FAILED, not
// tolerated) fails its job, and whether it still does: the count is read
// first and the task after, so a redrive that put the task back before
// the read is seen in the task, and one after it in the count. A redrive
// raises the count before it puts its tasks back, so between the two a
// failure of the ended generation is still FAILED under the new count:
// the redrive marked it before raising the count (its RedrivePending).
func (s *Kernel) FailureGen(ctx context.Context, t domain.Task) (gen int, current bool, err error) {
	gen, err = s.RedriveGen(ctx, t.Ref.Job, -1)
	if err != nil || gen < 0 {
		return gen, true, err
	}
	now, err := s.store.TaskGet(ctx, t.Ref)
	if err != nil {
		return 0, false, err
	}
	if now.State != sm.TaskFailed || now.Attempt != t.Attempt || (gen > 0 && now.RedrivePending == gen) {
		s.log.Info("task failure overtaken by a redrive; the job is left alone", "task", t.Ref.String(), "attempt", t.Attempt, "state", string(now.State), "now_attempt", now.Attempt, "redrive_pending", now.RedrivePending)
		return gen, false, nil
	}
	return gen, true, nil
}
