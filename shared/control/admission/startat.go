package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A job submitted with a start time (SubmitRequest.At) passes every check
// a submission does and is recorded at once, under its idempotency key,
// WAITING, with a start entry in the schedules' index (dynamo/jobstart.go)
// and no stage started. The sweep's firing step and the timer queue find
// the entry as they find a schedule's firing, and StartJob starts the job.

const (
	// MaxStartAhead is how far ahead a start time may be.
	MaxStartAhead = 366 * 24 * time.Hour
	// StartAtSkew is how far in the past a start time may be, for a
	// caller's clock behind ours: such a job starts at once.
	StartAtSkew = time.Minute
)

// errStartPast marks a start time too far in the past: refused for a new
// submission, not for a repeat of a recorded one.
var errStartPast = errors.New("start time in the past")

// pastError is the *spec.FieldError for `at` in the past, which also
// matches errStartPast.
type pastError struct{ spec.FieldError }

func (e *pastError) Unwrap() []error { return []error{&e.FieldError, errStartPast} }

// checkStartAt returns the start time a submission waits for: zero for
// none, or for one that has come already (within StartAtSkew).
func (s *Admitter) checkStartAt(at time.Time) (time.Time, error) {
	if at.IsZero() {
		return time.Time{}, nil
	}
	now := s.Now()
	switch {
	case at.Before(now.Add(-StartAtSkew)):
		return time.Time{}, &pastError{spec.FieldError{Field: "at", Message: fmt.Sprintf("%s is in the past (now %s)",
			at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}}
	case at.After(now.Add(MaxStartAhead)):
		return time.Time{}, &spec.FieldError{Field: "at", Message: fmt.Sprintf("%s is more than %d days ahead",
			at.UTC().Format(time.RFC3339), MaxStartAhead/(24*time.Hour))}
	case !at.After(now):
		return time.Time{}, nil
	}
	// Milliseconds, as the job record keeps times.
	return at.UTC().Truncate(time.Millisecond), nil
}

// StartJob starts the WAITING job of a start entry: the guarded
// transition to RUNNING (which puts its root stages in the sweep index and
// deletes the entry), then the start of its root stages, as a submission
// starts them. A second caller (a duplicate timer message, the sweep
// racing the timer, a retry after a lost response) finds the job RUNNING
// and tries the root stages' start again, which is guarded too, so it
// happens once; a crash before it is repaired by the sweep's look at the
// root stages. A job cancelled while it waited is schedules.StartEnded.
func (s *Admitter) StartJob(ctx context.Context, e dynamo.IndexEntry, job *domain.Job) (schedules.StartOutcome, error) {
	if job == nil {
		j, err := s.store.JobGet(ctx, e.Job)
		if errors.Is(err, domain.ErrNotFound) {
			return schedules.StartEnded, nil // cancelled, then deleted
		}
		if err != nil {
			return "", fmt.Errorf("start job %s: %w", e.Job, err)
		}
		job = &j
	}
	sp := job.Spec
	roots := sp.Roots()
	now := s.Now()
	outcome := schedules.StartDone
	jv := *job
	jv.ID = e.Job
	started := dynamo.StartedEvent(jv, now)
	err := s.store.JobStart(ctx, dynamo.JobStartParams{Job: e.Job, Roots: roots, Now: now, StageDue: now.Add(s.cfg.StartGrace), Entry: e,
		Owner: job.Owner, Name: sp.Name, Created: job.Created, Outbox: &started})
	if errors.Is(err, sm.ErrInvalidTransition) {
		state, serr := s.store.JobState(ctx, e.Job)
		if serr != nil {
			return "", fmt.Errorf("start job %s: %w", e.Job, serr)
		}
		switch state {
		case sm.JobRunning:
			outcome = schedules.StartAlready
		case sm.JobWaiting: // a read gone stale: the caller retries
			return "", fmt.Errorf("start job %s: refused while WAITING: %w", e.Job, err)
		default: // cancelled while it waited
			return schedules.StartEnded, nil
		}
	} else if err != nil {
		return "", err
	}
	log := s.log.With("job_id", e.Job)
	if outcome == schedules.StartDone {
		schedules.JobWritten(ctx) // a burst's job writes go first (schedules/firinggate.go)
		log.Info("job started", "start_at", e.At, "late", now.Sub(e.At))
		s.PublishEvents(ctx, started.ID) // kernel/events.go
	}
	for _, idx := range roots {
		if err := s.stages.StartStage(ctx, e.Job, sp, idx); err != nil {
			// The job runs; the sweep starts the stage later.
			log.Warn("start root stage", "stage", idx, "err", err)
		}
	}
	return outcome, nil
}
