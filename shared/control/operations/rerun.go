package operations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/domain"
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
// The original's outputs are immutable, and undeletable while a rerun
// reuses them: the rerun's creation links it to each job whose outputs it
// reuses (dynamo/reuselinks.go), and deleting such a job or its data (or
// its expiry by retention) is refused (domain.ReusedError, 409 reused_by)
// until every linked rerun is deleted or has had its data deleted.

// RerunRequest asks to rerun job ID, from stage From (empty: the stages
// that did not complete).
type RerunRequest struct {
	Owner, ID, From string
	// IdempotencyKey works as for Submit; empty makes a fresh one, so each
	// such request makes a new job.
	IdempotencyKey string
}

// Rerun submits the rerun of an ended job.
func (s *Operator) Rerun(ctx context.Context, req RerunRequest) (admission.SubmitResult, error) {
	orig, err := s.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return admission.SubmitResult{}, err
	}
	refuse := func(code, reason string) error {
		return &RedriveError{ID: orig.ID, Code: code, Reason: reason, Rerun: true}
	}
	switch {
	case !sm.Jobs.IsTerminal(orig.State):
		return admission.SubmitResult{}, refuse("job_running", "it is "+string(orig.State)+"; only an ended job can be rerun")
	case !orig.DataDeleted.IsZero():
		return admission.SubmitResult{}, refuse("data_deleted", "its data was deleted: there are no outputs to reuse; submit its spec again")
	}
	sp := orig.Spec
	stages, err := s.store.StageList(ctx, orig.ID)
	if err != nil {
		return admission.SubmitResult{}, err
	}
	completed := func(i int) bool { return i < len(stages) && stages[i].State == sm.StageCompleted }
	run := map[int]bool{}
	if req.From != "" {
		idx, ok := sp.StageIndex(req.From)
		if !ok {
			return admission.SubmitResult{}, &spec.FieldError{Field: "from", Message: fmt.Sprintf("job %s has no stage %q", orig.ID, req.From)}
		}
		downstreamOf(sp, []int{idx}, run)
		for i := range sp.Stages {
			if !run[i] && !completed(i) {
				return admission.SubmitResult{}, refuse("stage_not_completed", fmt.Sprintf("stage %q did not complete in it, so it cannot be reused; rerun from it or from a stage before it", sp.Stages[i].Name))
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
	meta, err := s.Meta(ctx, orig.ID)
	if err != nil {
		return admission.SubmitResult{}, err
	}
	reuse := map[int]string{}
	for i := range sp.Stages {
		if run[i] {
			continue
		}
		reuse[i] = orig.ID
		if src, ok := meta.Reused[i]; ok {
			reuse[i] = src // reused there too: from the job that committed it
		}
	}
	// A retry of a request that already made its job answers that job:
	// the checks below look at the present, which that job may have
	// changed (its published output folder).
	if req.IdempotencyKey != "" {
		if err := admission.CheckKey("idempotencyKey", req.IdempotencyKey); err != nil {
			return admission.SubmitResult{}, err
		}
		id, found, err := s.store.JobByIdemKey(ctx, req.Owner, req.IdempotencyKey)
		if err != nil {
			return admission.SubmitResult{}, fmt.Errorf("rerun %s: %w", orig.ID, err)
		}
		if found {
			return admission.SubmitResult{JobID: id}, s.checkSameRerun(ctx, req.Owner, id, orig.ID, reuse)
		}
	}
	// A rerun of a rerun reuses stages from the jobs that committed them:
	// each must still have its data, or the new job would read outputs
	// that are gone (the check above covers orig only).
	if err := s.checkRerunSources(ctx, req.Owner, orig, sp, reuse); err != nil {
		return admission.SubmitResult{}, err
	}
	if err := s.checkRerunOutput(ctx, orig.ID, sp); err != nil {
		return admission.SubmitResult{}, err
	}
	body, err := json.Marshal(sp)
	if err != nil {
		return admission.SubmitResult{}, err
	}
	key := req.IdempotencyKey
	if key == "" {
		key = "rerun-" + s.newID()
	}
	res, err := s.admit.SubmitRerun(ctx, admission.SubmitRequest{Owner: req.Owner, IdempotencyKey: key, Spec: body},
		&dynamo.RerunParams{Of: orig.ID, Reuse: reuse})
	if errors.Is(err, dynamo.ErrSourceGone) {
		// A deletion of a source (or its data) won the race with this
		// rerun's link to it (dynamo/reuselinks.go): nothing was created.
		return admission.SubmitResult{}, &RedriveError{ID: orig.ID, Code: "source_deleted", Rerun: true,
			Reason: "a job whose outputs it would reuse is being deleted, or its data is; rerun from an earlier stage or submit its spec again"}
	}
	if errors.Is(err, dynamo.ErrTooManySources) {
		return admission.SubmitResult{}, &spec.FieldError{Field: "from", Message: fmt.Sprintf(
			"a rerun of job %s from here reuses outputs committed by too many jobs (a long chain of reruns) to link them all; rerun from an earlier stage, or submit its spec again", orig.ID)}
	}
	if err == nil && !res.Created {
		// The idempotency record compares spec hashes only: the same key
		// used for the rerun of another job with the same spec (or from
		// another stage) must not answer with the job it made first.
		err = s.checkSameRerun(ctx, req.Owner, res.JobID, orig.ID, reuse)
	}
	if err == nil && res.Created {
		s.log.Info("job rerun", "job_id", res.JobID, "rerun_of", orig.ID, "from", req.From, "reused_stages", len(reuse))
	}
	return res, err
}

// checkRerunSources refuses a rerun whose reused stages come from a job
// that is gone or whose data was deleted (orig's deletion is checked
// already), or, with a retention, whose objects may expire before the
// rerun's deadline: the bucket's lifecycle rule expires each object the
// retention after it was written (from its job's creation on), whoever
// reuses it.
func (s *Operator) checkRerunSources(ctx context.Context, owner string, orig domain.Job, sp *spec.Job, reuse map[int]string) error {
	deadline := time.Duration(sp.Deadline)
	if deadline == 0 {
		deadline = time.Duration(spec.MaxDeadline) // capDeadline's, with a retention
	}
	ends := s.Now().Add(deadline)
	checked := map[string]bool{}
	for i := range sp.Stages {
		src, ok := reuse[i]
		if !ok || checked[src] {
			continue
		}
		checked[src] = true
		name := sp.Stages[i].Name
		j := orig
		if src != orig.ID {
			var err error
			j, err = s.OwnedJob(ctx, owner, src)
			if errors.Is(err, domain.ErrNotFound) {
				return &RedriveError{ID: orig.ID, Code: "source_deleted", Rerun: true,
					Reason: fmt.Sprintf("its stage %q reuses the outputs of job %s, which was deleted; rerun from that stage", name, src)}
			}
			if err != nil {
				return fmt.Errorf("rerun %s: read job %s whose stage %q it reuses: %w", orig.ID, src, name, err)
			}
			if !j.DataDeleted.IsZero() {
				return &RedriveError{ID: orig.ID, Code: "data_deleted", Rerun: true,
					Reason: fmt.Sprintf("its stage %q reuses the outputs of job %s, whose data was deleted; rerun from that stage", name, src)}
			}
		}
		if r := s.cfg.Retention; r > 0 && j.Created.Add(r).Before(ends) {
			return &RedriveError{ID: orig.ID, Code: "outputs_expiring", Rerun: true,
				Reason: fmt.Sprintf("its stage %q reuses the outputs of job %s, which expire from %s (retention %v), before the rerun's deadline at %s; rerun from that stage",
					name, src, j.Created.Add(r).UTC().Format(time.RFC3339), r, ends.UTC().Format(time.RFC3339))}
		}
	}
	return nil
}

// checkRerunOutput refuses the rerun of a job whose output folder a job
// (the original, most often) has claimed: the rerun publishes to the
// same folder, and a claimed folder belongs to its job for good, so the
// rerun would do all its work and then fail publishing. A read that
// fails leaves the question to publishing.
func (s *Operator) checkRerunOutput(ctx context.Context, orig string, sp *spec.Job) error {
	if sp.Output == "" {
		return nil
	}
	bucket, folder, err := spec.ParseS3URI(sp.Output)
	if err != nil {
		return nil
	}
	c, err := s.stages.ReadClaim(ctx, bucket, folder+blob.ClaimName)
	if err != nil || c.Job == "" {
		return nil
	}
	return &RedriveError{ID: orig, Code: "output_claimed", Rerun: true,
		Reason: fmt.Sprintf("its output folder %s holds the outputs of job %s, and a rerun publishes to the same folder; submit its spec again with another output",
			sp.Output, c.Job)}
}

// checkSameRerun checks that the job an idempotency key already made is
// this rerun: of orig, reusing the same stages from the same jobs.
func (s *Operator) checkSameRerun(ctx context.Context, owner, id, orig string, reuse map[int]string) error {
	j, err := s.OwnedJob(ctx, owner, id)
	if err != nil {
		return fmt.Errorf("rerun %s: read job %s its idempotency key made: %w", orig, id, err)
	}
	if j.RerunOf != orig || !maps.Equal(j.Reused, reuse) {
		return fmt.Errorf("rerun %s: the idempotency key already made job %s, which is not this rerun (it reruns %q): %w",
			orig, id, j.RerunOf, domain.ErrIdempotencyConflict)
	}
	return nil
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
