package stages

// The tolerated failures a manifest lists.

import (
	"context"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// failedPartitions lists the tolerated failures of stages (of every stage
// of the job, for its job manifest), up to domain.MaxManifestFailed, and
// counts them all. It reads tasks only of stages that tolerated a
// failure, so a job without any costs one stage Query.
func (s *Lifecycle) failedPartitions(ctx context.Context, job string, sp *spec.Job, stages []int, all bool) ([]domain.FailedPartition, int, error) {
	recs, err := s.store.StageList(ctx, job)
	if err != nil {
		return nil, 0, err
	}
	want := map[int]bool{}
	for _, i := range stages {
		want[i] = true
	}
	var out []domain.FailedPartition
	total := 0
	for _, st := range recs {
		if st.Tolerated == 0 || (!all && !want[st.Index]) || st.Index >= len(sp.Stages) {
			continue
		}
		total += st.Tolerated
		// A rerun's reused stage: its failed tasks are the source job's.
		src, err := s.stageSource(ctx, job, st.Index) // reuse.go
		if err != nil {
			return nil, 0, err
		}
		for after := -1; after+1 < st.Total && len(out) < domain.MaxManifestFailed; {
			pg, err := s.store.TaskListPage(ctx, dynamo.TaskPageParams{
				Job: src, Stage: st.Index, Total: st.Total, State: sm.TaskFailed, After: after, Limit: dynamo.TaskBucket, MaxReads: 1,
			})
			if err != nil {
				return nil, 0, err
			}
			for _, row := range pg.Rows {
				if t := row.Task; t.Tolerated && len(out) < domain.MaxManifestFailed {
					out = append(out, domain.FailedPartition{Stage: sp.Stages[st.Index].Name, Partition: t.Ref.Partition,
						Attempts: t.Attempt, Error: t.LastError, Class: string(t.ErrorClass)})
				}
			}
			if pg.Done || pg.Next <= after {
				break
			}
			after = pg.Next
		}
	}
	return out, total, nil
}
