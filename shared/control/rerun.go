package control

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Rerun (issue 13.9) runs an ended job again as a new job with the same
// spec, reusing the committed outputs of the stages it does not run.
//
// Downstream tasks find upstream outputs in two places only: a shuffle's
// reducers read the upstream stage's manifest (blob.StageManifestKey of
// their own job), and the job manifest lists its last stages' committed
// task outputs (blob.OutputKey of the job, read from its task records).
// A reused stage therefore runs no task: it is planned with the source
// stage's task total and no counters (AdoptStage), so it completes at
// once, its stage manifest is the source's manifest copied under the new
// job's key (it lists the source's objects, which never change), and the
// job manifest lists the source's task outputs. Publishing accepts them
// as the job's own. A stage can be reused only from a job of the same
// owner (Rerun is owner-scoped), and transitively: a rerun of a rerun
// reuses the stage from the job whose tasks committed it.
//
// The original's outputs are immutable, but not undeletable: deleting its
// data (DELETE /jobs/{id}/data) removes what a rerun reused.

// RerunRequest asks to rerun job ID, from stage From (empty: the stages
// that did not complete).
type RerunRequest struct {
	Owner, ID, From string
	// IdempotencyKey works as for Submit; empty makes a fresh one, so each
	// such request makes a new job.
	IdempotencyKey string
}

// rerunStore is the store's side of reruns (dynamo.Store).
type rerunStore interface {
	AdoptStage(ctx context.Context, job string, idx, total int) error
}

// Rerun submits the rerun of an ended job.
func (s *Service) Rerun(ctx context.Context, req RerunRequest) (SubmitResult, error) {
	if _, ok := s.store.(rerunStore); !ok {
		return SubmitResult{}, errNoRedriveStore
	}
	orig, err := s.ownedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return SubmitResult{}, err
	}
	refuse := func(code, reason string) error {
		return &RedriveError{ID: orig.ID, Code: code, Reason: reason, Rerun: true}
	}
	switch {
	case !sm.Jobs.IsTerminal(orig.State):
		return SubmitResult{}, refuse("job_running", "it is "+string(orig.State)+"; only an ended job can be rerun")
	case !orig.DataDeleted.IsZero():
		return SubmitResult{}, refuse("data_deleted", "its data was deleted: there are no outputs to reuse; submit its spec again")
	}
	sp := orig.Spec
	stages, err := s.store.ListStages(ctx, orig.ID)
	if err != nil {
		return SubmitResult{}, err
	}
	completed := func(i int) bool { return i < len(stages) && stages[i].State == sm.StageCompleted }
	run := map[int]bool{}
	if req.From != "" {
		idx, ok := sp.StageIndex(req.From)
		if !ok {
			return SubmitResult{}, &spec.FieldError{Field: "from", Message: fmt.Sprintf("job %s has no stage %q", orig.ID, req.From)}
		}
		downstreamOf(sp, []int{idx}, run)
		for i := range sp.Stages {
			if !run[i] && !completed(i) {
				return SubmitResult{}, refuse("stage_not_completed", fmt.Sprintf("stage %q did not complete in it, so it cannot be reused; rerun from it or from a stage before it", sp.Stages[i].Name))
			}
		}
	} else {
		var todo []int
		for i := range sp.Stages {
			if !completed(i) {
				todo = append(todo, i)
			}
		}
		downstreamOf(sp, todo, run)
	}
	meta, err := s.jobMeta(ctx, orig.ID)
	if err != nil {
		return SubmitResult{}, err
	}
	reuse := map[int]string{}
	for i := range sp.Stages {
		if run[i] {
			continue
		}
		reuse[i] = orig.ID
		if src, ok := meta.reused[i]; ok {
			reuse[i] = src // reused there too: from the job that committed it
		}
	}
	body, err := json.Marshal(sp)
	if err != nil {
		return SubmitResult{}, err
	}
	key := req.IdempotencyKey
	if key == "" {
		key = "rerun-" + s.NewID()
	}
	res, _, err := s.submit(ctx, SubmitRequest{Owner: req.Owner, IdempotencyKey: key, Spec: body,
		rerun: &dynamo.RerunParams{Of: orig.ID, Reuse: reuse}}, nil)
	if err == nil && res.Created {
		s.log.Info("job rerun", "job_id", res.JobID, "rerun_of", orig.ID, "from", req.From, "reused_stages", len(reuse))
	}
	return res, err
}

// downstreamOf adds the stages in from and every stage after them to set.
func downstreamOf(sp *spec.Job, from []int, set map[int]bool) {
	for len(from) > 0 {
		i := from[0]
		from = from[1:]
		if set[i] {
			continue
		}
		set[i] = true
		from = append(from, sp.Downstream(i)...)
	}
}

// withRerun is m with a rerun's reused stages.
func withRerun(m jobMeta, p *dynamo.RerunParams) jobMeta {
	if p != nil && len(p.Reuse) > 0 {
		m.reused = maps.Clone(p.Reuse)
	}
	return m
}

// stageSource is the job whose task records and outputs stand for stage
// idx of job: the job itself, or for a rerun's reused stage, the job whose
// tasks committed it.
func (s *Service) stageSource(ctx context.Context, job string, idx int) (string, error) {
	m, err := s.jobMeta(ctx, job)
	if err != nil {
		return "", err
	}
	if src, ok := m.reused[idx]; ok {
		return src, nil
	}
	return job, nil
}

// adoptStage completes a rerun's reused stage without running it.
func (s *Service) adoptStage(ctx context.Context, job string, idx int, src string) error {
	rs, ok := s.store.(rerunStore)
	if !ok {
		return errNoRedriveStore
	}
	st, err := s.store.GetStage(ctx, src, idx)
	if err != nil {
		return fmt.Errorf("reuse stage %d of job %s: %w", idx, src, err)
	}
	if st.State != sm.StageCompleted {
		return fmt.Errorf("reuse stage %d of job %s: it is %s", idx, src, st.State)
	}
	if err := rs.AdoptStage(ctx, job, idx, st.Total); err != nil {
		return err
	}
	s.log.Info("stage reused", "job_id", job, "stage", st.Name, "from_job", src, "tasks", st.Total)
	return s.checkStageComplete(ctx, job, idx)
}

// copyReusedManifest writes a reused shuffle stage's manifest: the source
// stage's, copied. done is false for any other manifest.
func (s *Service) copyReusedManifest(ctx context.Context, job string, sp *spec.Job, stages []int, key string) (done bool, err error) {
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
	if err := s.blob.PutIfAbsent(ctx, key, raw); err != nil && !errors.Is(err, batch.ErrExists) {
		return true, err
	}
	return true, nil
}

// ownOutput reports whether o is an output of job: one of its attempts',
// or of the job a rerun's reused stage comes from.
func (s *Service) ownOutput(ctx context.Context, job string, o batch.Output) bool {
	if o.Key == blob.OutputKey(job, o.Stage, o.Partition, o.Attempt, o.Part) {
		return true
	}
	m, err := s.jobMeta(ctx, job)
	if err != nil || m.spec == nil {
		return false
	}
	idx, ok := m.spec.StageIndex(o.Stage)
	if !ok {
		return false
	}
	src, ok := m.reused[idx]
	return ok && o.Key == blob.OutputKey(src, o.Stage, o.Partition, o.Attempt, o.Part)
}
