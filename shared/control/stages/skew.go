package stages

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/skew"
	"github.com/batchwork/batchwork/shared/spec"
)

// skewTotal (a function: Lifecycle is at its 40 methods) is the number of tasks of a stage reading shuffles of parts
// partitions: parts, and for a stage with skew, its hot partitions'
// extra pieces, from its plan (shared/skew), made from the upstream
// manifests and map outputs' indexes and written once before the stage's
// total (StageSetPlan), so a retried materialization plans the same.
func skewTotal(ctx context.Context, s *Lifecycle, job string, sp *spec.Job, idx, parts int) (int, error) {
	if sp.Stages[idx].Skew == nil {
		return parts, nil
	}
	p, err := skew.Load(ctx, s.blob, job, sp, idx)
	if err != nil {
		return 0, fmt.Errorf("stage %s/%s: plan skew: %w", job, sp.Stages[idx].Name, err)
	}
	if n := len(p.Pieces); n > 0 {
		s.log.Info("skewed partitions split", "job_id", job, "stage", sp.Stages[idx].Name, "pieces", n, "tasks", p.Tasks(), "median_bytes", p.Median)
	}
	return p.Tasks(), nil
}

// skewPartials tells the tasks of stage idx whose outputs are partial
// results: the pieces of a combinable stage's hot partitions, which their
// partition's task reduces. The stage's manifest leaves them out.
func skewPartials(ctx context.Context, s *Lifecycle, job string, sp *spec.Job, idx int) (func(int) bool, error) {
	none := func(int) bool { return false }
	if sk := sp.Stages[idx].Skew; sk == nil || !sk.Combinable {
		return none, nil
	}
	src, err := s.stageSource(ctx, job, idx) // reuse.go: a rerun's reused stage is planned in its job
	if err != nil {
		return nil, err
	}
	p, err := skew.Read(ctx, s.blob, src, sp, idx)
	if err != nil {
		return nil, fmt.Errorf("manifest of stage %s: %w", sp.Stages[idx].Name, err)
	}
	return func(task int) bool { return task >= p.Partitions }, nil
}
