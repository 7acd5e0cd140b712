package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
)

// SubmitRequest is a job submission.
type SubmitRequest struct {
	Owner string
	// IdempotencyKey makes the submission safe to retry: the same key
	// returns the same job and never creates a second one.
	IdempotencyKey string
	Spec           []byte
	// Params are the run parameters' values (spec.Job.Resolve): part of
	// what the key stands for, since the stored spec holds them.
	Params map[string]string
	// At, when set and in the future, is when the job starts: it waits
	// until then, WAITING (startat.go).
	At time.Time
}

// SubmitResult says which job the submission maps to.
type SubmitResult struct {
	JobID   string `json:"jobId"`
	Created bool   `json:"created"`
	// StartAt is when a job this call created WAITING starts.
	StartAt *time.Time `json:"startAt,omitempty"`
}

// MaxIdempotencyKey bounds idempotency keys (they are part of a key).
const MaxIdempotencyKey = 128

// Submit validates a spec and records the job exactly once, then starts its
// root stages. Validation errors are *spec.ValidationError (or a
// spec.FieldError for request fields); nothing is written for them.
func (s *Admitter) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	res, _, err := s.submit(ctx, req, nil, nil)
	return res, err
}

// SubmitFiring is Submit for a schedule's firing: the job is created only
// if the schedule is as the firing read it (guard; otherwise
// dynamo.ErrCursorMoved). It also returns the job's creation time when
// this call created it, so the firing records its run without reading the
// job back.
func (s *Admitter) SubmitFiring(ctx context.Context, req SubmitRequest, guard *dynamo.FiringGuard) (SubmitResult, time.Time, error) {
	return s.submit(ctx, req, guard, nil)
}

// SubmitRerun is Submit for a rerun (operations/rerun.go): the job
// reuses the committed stages rerun names from other jobs.
func (s *Admitter) SubmitRerun(ctx context.Context, req SubmitRequest, rerun *dynamo.RerunParams) (SubmitResult, error) {
	res, _, err := s.submit(ctx, req, nil, rerun)
	return res, err
}

// submit is every submission's: a firing's guard and a rerun's reuse are
// written with the job, in its one transaction.
func (s *Admitter) submit(ctx context.Context, req SubmitRequest, firing *dynamo.FiringGuard, rerun *dynamo.RerunParams) (_ SubmitResult, _ time.Time, err error) {
	// The job's trace starts here; its traceparent goes with the job.
	ctx, span := tracing.Start(ctx, "batchwork.submit")
	defer func() { tracing.End(span, err) }()
	if err := CheckKey("idempotencyKey", req.IdempotencyKey); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	if err := CheckOwner(req.Owner); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	startAt, err := s.checkStartAt(req.At) // startat.go
	if err != nil {
		// A start time gone by is no reason to refuse a repeat of a
		// submission its key recorded (a retry after a lost response
		// arriving late): the key, not the clock, decides, and the job it
		// made answers as any repeat's does (JobCreate below).
		if _, found, lerr := s.store.JobByIdemKey(ctx, req.Owner, req.IdempotencyKey); lerr != nil || !found || !errors.Is(err, errStartPast) {
			return SubmitResult{}, time.Time{}, err
		}
		startAt = time.Time{}
	}
	sp, err := spec.Parse(req.Spec)
	if err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// Every check below sees the resolved spec (params.go).
	if sp, err = resolveParams(sp, req.Params, rerun); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	if err := s.checkPriority(req.Owner, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// A task no executor runs would fail every attempt (tasknames.go).
	if err := s.CheckTaskNames(ctx, sp); err != nil {
		return SubmitResult{}, time.Time{}, err
	}
	// Likewise an exec program no executor has (programs.go).
	if err := s.CheckPrograms(ctx, sp); err != nil {
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
	if err := s.stages.ResolveOutput(req.Owner, sp); err != nil { // stages/publish.go
		return SubmitResult{}, time.Time{}, err
	}
	if err := s.stages.CheckOutputClaimed(ctx, req.Owner, req.IdempotencyKey, sp); err != nil { // stages/outputclaimed.go
		return SubmitResult{}, time.Time{}, err
	}
	s.capDeadline(sp) // deadline.go
	now := s.Now()
	job := domain.Job{ID: s.newID(), Owner: req.Owner, Spec: sp, SpecHash: sp.Hash(), Created: now, StartAt: startAt, Trace: tracing.Traceparent(ctx)}
	params := dynamo.CreateJobParams{
		Job: job, IdemKey: req.IdempotencyKey, StageDue: now.Add(s.cfg.StartGrace), IdemTTL: s.cfg.IdemTTL,
		JobDue: kernel.JobDeadline(job), Firing: firing, Rerun: rerun, StartAt: startAt,
	}
	params.Quota = s.JobQuota(req.Owner, sp)
	if q := params.Quota; q != nil && q.MaxTasks > 0 && q.Tasks > q.MaxTasks {
		// Alone over the quota: the counter's condition would pass an
		// owner whose counter does not exist yet.
		return SubmitResult{}, time.Time{}, &kernel.QuotaError{Quota: "tasks", Max: q.MaxTasks, Alone: true}
	}
	// From its creation, the job's requests are its cost (shared/cost);
	// the checks before, which may refuse it, are no job's.
	ctx = meter.WithJob(ctx, job.ID)
	id, created, err := s.store.JobCreate(ctx, params)
	if errors.Is(err, dynamo.ErrQuotaReached) {
		err = s.QuotaError(ctx, req.Owner, params.Quota)
	}
	if err != nil {
		return SubmitResult{JobID: id}, time.Time{}, fmt.Errorf("submit: %w", err)
	}
	span.SetAttributes(tracing.JobKey.String(id))
	schedules.JobWritten(ctx)    // a burst's job writes go first (schedules/firinggate.go)
	ctx = meter.WithJob(ctx, id) // from here, its requests are the job's cost
	// The job's spec is this one (an existing job under the same key has
	// the same spec hash), so the claims and commits this process serves
	// need not read it back.
	meta := kernel.JobMeta{Spec: sp, Owner: req.Owner}
	if created {
		meta.Trace = job.Trace // an earlier submission's job has its own
	}
	s.RememberMeta(id, withRerun(meta, rerun))
	log := s.log.With("job_id", id)
	if created {
		log.Info("job submitted", "name", sp.Name, "stages", len(sp.Stages))
		s.PublishEvents(ctx, events.SubmittedID(id)) // kernel/events.go
	}
	if created && !startAt.IsZero() {
		// Its start entry starts it (startat.go).
		return SubmitResult{JobID: id, Created: true, StartAt: &startAt}, now, nil
	}
	// A repeated submission also tries the start: if the first submitter
	// died after recording the job, this finishes its work sooner than the
	// sweep would. Starting is a guarded transition, so it happens once.
	for _, idx := range sp.Roots() {
		if err := s.stages.StartStage(ctx, id, sp, idx); err != nil {
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

// CheckOwner refuses an owner no submission may have, with a
// *spec.FieldError.
func CheckOwner(owner string) error {
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

// CheckKey refuses an idempotency key (named field) that cannot be part
// of a key, with a *spec.FieldError.
func CheckKey(field, v string) error {
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

// withRerun is m with a rerun's reused stages.
func withRerun(m kernel.JobMeta, p *dynamo.RerunParams) kernel.JobMeta {
	if p != nil && len(p.Reuse) > 0 {
		m.Reused = maps.Clone(p.Reuse)
	}
	return m
}
