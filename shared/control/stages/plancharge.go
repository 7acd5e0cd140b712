package stages

// An input stage's plan, charged to its owner's tasks quota.

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// chargePlan charges a stage's plan of total tasks, for which submit
// counted `counted` (declaredTasks: one for an input stage, a skewed
// stage's shuffle partitions), to its job's owner. A plan that
// would pass the owner's tasks quota fails the job with the quota's
// error, and chargePlan says it handled the stage (done).
func (s *Lifecycle) chargePlan(ctx context.Context, job string, idx, total, counted int) (done bool, err error) {
	m, err := s.Meta(ctx, job)
	if err != nil {
		return false, err
	}
	maxTasks := s.cfg.TaskQuota.For(m.Owner)
	err = s.store.StageChargePlan(ctx, dynamo.PlanChargeParams{Job: job, Stage: idx, Tasks: total - counted, MaxTasks: maxTasks})
	if !errors.Is(err, dynamo.ErrQuotaReached) {
		return false, err
	}
	qe := &kernel.QuotaError{Quota: "tasks", Max: maxTasks, Alone: total > maxTasks}
	return true, s.failMaterialize(ctx, job, idx, fmt.Errorf("the stage plans %d tasks: %w", total, qe))
}
