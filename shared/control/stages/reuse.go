package stages

// A rerun's reused stages: where their records and outputs live, their
// adoption, and their manifests.

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// stageSource is the job whose task records and outputs stand for stage
// idx of job: the job itself, or for a rerun's reused stage, the job whose
// tasks committed it.
func (s *Lifecycle) stageSource(ctx context.Context, job string, idx int) (string, error) {
	m, err := s.Meta(ctx, job)
	if err != nil {
		return "", err
	}
	if src, ok := m.Reused[idx]; ok {
		return src, nil
	}
	return job, nil
}

// adoptStage completes a rerun's reused stage without running it.
func (s *Lifecycle) adoptStage(ctx context.Context, job string, idx int, src string) error {
	st, err := s.store.StageGet(ctx, src, idx)
	if err != nil {
		return fmt.Errorf("reuse stage %d of job %s: %w", idx, src, err)
	}
	if st.State != sm.StageCompleted {
		return fmt.Errorf("reuse stage %d of job %s: it is %s", idx, src, st.State)
	}
	// Its tolerated failures first: the adopted stage completes at once,
	// and its missing partitions must count in the rerun too.
	if st.Tolerated > 0 {
		if err := s.store.StageAdoptTolerated(ctx, job, idx, st.Tolerated); err != nil {
			return err
		}
	}
	if err := s.store.StageAdopt(ctx, job, idx, st.Total); err != nil {
		return err
	}
	s.log.Info("stage reused", "job_id", job, "stage", st.Name, "from_job", src, "tasks", st.Total)
	return s.CheckStageComplete(ctx, job, idx)
}

// copyReusedManifest writes a reused shuffle stage's manifest: the source
// stage's, copied. done is false for any other manifest.
func (s *Lifecycle) copyReusedManifest(ctx context.Context, job string, sp *spec.Job, stages []int, key string) (done bool, err error) {
	if len(stages) != 1 {
		return false, nil
	}
	src, err := s.stageSource(ctx, job, stages[0])
	if err != nil || src == job {
		return false, err
	}
	name := sp.Stages[stages[0]].Name
	if key != blob.StageManifestKey(job, name) {
		return false, nil
	}
	raw, err := s.blob.Get(ctx, blob.StageManifestKey(src, name))
	if err != nil {
		return true, fmt.Errorf("reuse the manifest of stage %s of job %s: %w", name, src, err)
	}
	if err := s.blob.PutIfAbsent(ctx, key, raw); err != nil && !errors.Is(err, domain.ErrExists) {
		return true, err
	}
	return true, nil
}

// ownOutput reports whether o is an output of job: one of its attempts',
// or of the job a rerun's reused stage comes from.
func (s *Lifecycle) ownOutput(ctx context.Context, job string, o domain.Output) bool {
	if o.Key == blob.OutputKey(job, o.Stage, o.Partition, o.Attempt, o.Part) {
		return true
	}
	m, err := s.Meta(ctx, job)
	if err != nil || m.Spec == nil {
		return false
	}
	idx, ok := m.Spec.StageIndex(o.Stage)
	if !ok {
		return false
	}
	src, ok := m.Reused[idx]
	return ok && o.Key == blob.OutputKey(src, o.Stage, o.Partition, o.Attempt, o.Part)
}
