package control

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
)

// SubmitRequest is a job submission.
type SubmitRequest struct {
	Owner string
	// IdempotencyKey makes the submission safe to retry: the same key
	// returns the same job and never creates a second one.
	IdempotencyKey string
	Spec           []byte
	// rerun, set by Rerun (rerun.go), makes the job a rerun that reuses
	// other jobs' committed stages.
	rerun *dynamo.RerunParams
}

// SubmitResult says which job the submission maps to.
type SubmitResult struct {
	JobID   string `json:"jobId"`
	Created bool   `json:"created"`
}

// MaxIdempotencyKey bounds idempotency keys (they are part of a key).
const MaxIdempotencyKey = 128

// Submit validates a spec and records the job exactly once, then starts its
// root stages. Validation errors are *spec.ValidationError (or a
// spec.FieldError for request fields); nothing is written for them.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	res, _, err := s.submit(ctx, req, nil)
	return res, err
}

// submit is Submit for a schedule's firing too: with firing set the job is
// created only if the schedule is as the firing read it (otherwise
// dynamo.ErrCursorMoved). It also returns the job's creation time when
// this call created it, so a firing records its run without reading the
// job back.
func (s *Service) submit(ctx context.Context, req SubmitRequest, firing *dynamo.FiringGuard) (SubmitResult, time.Time, error) {
	if err := checkKey("idempotencyKey", req.IdempotencyKey); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	if err := checkOwner(req.Owner); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	sp, err := spec.Parse(req.Spec)
	if err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	if err := s.checkPriority(req.Owner, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// A task no executor runs would fail every attempt (tasknames.go).
	if err := s.checkTaskNames(ctx, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// Likewise an exec program no executor has (programs.go).
	if err := s.checkPrograms(ctx, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// A stage's executor size must be one the stack deploys (memory.go).
	if err := s.checkExecutorSizes(sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// Lambda stages may invoke only the operator's functions (taskfunctions.go).
	if fe := s.checkTaskFunctions(sp); fe != nil {
		return SubmitResult{}, time.Time{}, fe
	}
	// Inputs are checked against the owner and inputs:<path> prefixes
	// resolved before the spec is hashed and stored.
	if err := s.resolveInputs(ctx, req.Owner, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	if err := s.resolveOutput(req.Owner, sp); err != nil { // stages/publish.go
		return SubmitResult{}, time.Time{}, err
	}
	if err := s.checkOutputClaimed(ctx, req.Owner, req.IdempotencyKey, sp); err != nil { // stages/outputclaimed.go
		return SubmitResult{}, time.Time{}, err
	}
	s.capDeadline(sp) // retention.go
	now := s.Now()
	job := batch.Job{ID: s.NewID(), Owner: req.Owner, Spec: sp, SpecHash: sp.Hash(), Created: now}
	params := dynamo.CreateJobParams{
		Job: job, IdemKey: req.IdempotencyKey, StageDue: now.Add(s.cfg.StartGrace), IdemTTL: s.cfg.IdemTTL,
		JobDue: jobDeadline(job), Firing: firing, Rerun: req.rerun,
	}
	q := s.cfg.Quotas
	if maxJobs, maxTasks := q.ActiveJobs.For(req.Owner), q.Tasks.For(req.Owner); maxJobs > 0 || maxTasks > 0 {
		params.Quota = &dynamo.JobQuota{Tasks: declaredTasks(sp), MaxJobs: maxJobs, MaxTasks: maxTasks}
		if maxTasks > 0 && params.Quota.Tasks > maxTasks {
			// Alone over the quota: the counter's condition would pass an
			// owner whose counter does not exist yet.
			return SubmitResult{}, time.Time{}, &QuotaError{Quota: "tasks", Max: maxTasks, Alone: true}
		}
	}
	id, created, err := s.store.CreateJob(ctx, params)
	if errors.Is(err, dynamo.ErrQuotaReached) {
		err = s.quotaError(ctx, req.Owner, params.Quota)
	}
	if err != nil {
		return SubmitResult{JobID: id}, time.Time{}, fmt.Errorf("submit: %w", err)
	}
	schedules.JobWritten(ctx) // a burst's job writes go first (firinggate.go)
	// The job's spec is this one (an existing job under the same key has
	// the same spec hash), so the claims and commits this process serves
	// need not read it back.
	s.RememberMeta(id, withRerun(kernel.JobMeta{Spec: sp, Owner: req.Owner}, req.rerun)) // rerun.go
	log := s.log.With("job_id", id)
	if created {
		log.Info("job submitted", "name", sp.Name, "stages", len(sp.Stages))
		s.PublishEvents(ctx, events.SubmittedID(id)) // events.go
	}
	// A repeated submission also tries the start: if the first submitter
	// died after recording the job, this finishes its work sooner than the
	// sweep would. Starting is a guarded transition, so it happens once.
	for _, idx := range sp.Roots() {
		if err := s.startStage(ctx, id, sp, idx); err != nil {
			// The job is recorded; the sweep starts the stage later.
			log.Warn("start root stage", "stage", idx, "err", err)
		}
	}
	if !created {
		now = time.Time{}
	}
	return SubmitResult{JobID: id, Created: created}, now, nil
}

// MaxOwner bounds owners: an IAM principal ARN is at most 2,048 bytes.
// Keys hold a hash of the owner, so its length costs nothing there.
const MaxOwner = 2048

func checkOwner(owner string) error {
	switch {
	case owner == "":
		return &spec.FieldError{Field: "owner", Message: "is required (the caller's IAM principal)"}
	case len(owner) > MaxOwner:
		return &spec.FieldError{Field: "owner", Message: fmt.Sprintf("the caller's IAM principal ARN is longer than %d bytes", MaxOwner)}
	case strings.ContainsRune(owner, 0):
		return &spec.FieldError{Field: "owner", Message: "must not contain NUL"}
	}
	return nil
}

func checkKey(field, v string) error {
	switch {
	case v == "":
		return &spec.FieldError{Field: field, Message: "is required"}
	case len(v) > MaxIdempotencyKey:
		return &spec.FieldError{Field: field, Message: fmt.Sprintf("is longer than %d bytes", MaxIdempotencyKey)}
	case strings.ContainsAny(v, "#\x00"):
		return &spec.FieldError{Field: field, Message: "must not contain '#' or NUL"}
	}
	return nil
}
