package stages

// An input stage's plan, charged to its owner's tasks quota.

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// chargePlan charges an input stage's plan of total tasks, for which
// submit counted one (declaredTasks), to its job's owner. A plan that
// would pass the owner's tasks quota fails the job with the quota's
// error, and chargePlan says it handled the stage (done).
func (s *Lifecycle) chargePlan(ctx context.Context, job string, idx, total int) (done bool, err error) {
	m, err := s.Meta(ctx, job)
	if err != nil {
		return false, err
	}
	maxTasks := s.cfg.TaskQuota.For(m.Owner)
	err = s.store.StageChargePlan(ctx, dynamo.PlanChargeParams{Job: job, Stage: idx, Tasks: total - 1, MaxTasks: maxTasks})
	if !errors.Is(err, dynamo.ErrQuotaReached) {
		return false, err
	}
	qe := &kernel.QuotaError{Quota: "tasks", Max: maxTasks, Alone: total > maxTasks}
	return true, s.failMaterialize(ctx, job, idx, fmt.Errorf("the stage plans %d tasks: %w", total, qe))
}
