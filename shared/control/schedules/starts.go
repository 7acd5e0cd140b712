package schedules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A job submitted with a start time waits WAITING with a start entry in
// the upcoming-firings index (dynamo/jobstart.go). The entry is found as a
// schedule's firing is: handed to the timer queue by the sweep within
// TimerWindow of its time (or by its submitter, HandOffStart), waited out
// to the exact time by the consumer, and fired by the sweep itself as the
// fallback. Admission starts the job (Admission.StartJob): a guarded
// transition, so whoever gets there first starts it, once.

// StartOutcome says what a start entry's StartJob did.
type StartOutcome string

const (
	// StartDone: this call moved the job to RUNNING.
	StartDone StartOutcome = "started"
	// StartAlready: another caller had (its root stages' start was
	// tried again, which is guarded).
	StartAlready StartOutcome = "alreadyStarted"
	// StartEnded: the job was cancelled (or deleted) before it started.
	StartEnded StartOutcome = "ended"
)

// timerBody is the timer message of an index entry.
func timerBody(e dynamo.IndexEntry, b schedule.Bucket) timerMsg {
	if e.Job != "" {
		return timerMsg{Owner: e.Owner, Job: e.Job, At: e.At, Bucket: b.Key()}
	}
	return timerMsg{Owner: e.Owner, Firing: schedule.FiringKey(e.ScheduleID, e.At), Bucket: b.Key()}
}

// fireStart is the sweep's (and the timer's) handling of a due start
// entry. The start deletes the entry; a job that ended while it waited
// has its entry dropped here.
func (s *Firer) fireStart(ctx context.Context, e dynamo.IndexEntry, job *domain.Job, now time.Time, c *FireCounts) error {
	outcome, err := s.admission.StartJob(ctx, e, job)
	if err != nil {
		return fmt.Errorf("start job %s: %w", e.Job, err)
	}
	switch outcome {
	case StartDone:
		c.Started++
		return nil
	case StartEnded:
		c.Dropped++
	}
	return s.store.ScheduleMoveEntry(ctx, e, time.Time{}, now)
}

// startTimer is FireTimer for a start: a job no longer WAITING is left
// alone (its entry is dropped by the sweep); otherwise it waits for the
// exact time and starts the job. The job is read before the wait, so at
// the time only the start's own write is left to do.
func (s *Firer) startTimer(ctx context.Context, e dynamo.IndexEntry) (TimerOutcome, error) {
	job, err := s.store.JobGet(ctx, e.Job)
	if errors.Is(err, domain.ErrNotFound) {
		return TimerDropped, nil // cancelled, then deleted
	}
	if err != nil {
		return "", fmt.Errorf("start timer of job %s: %w", e.Job, err)
	}
	switch job.State {
	case sm.JobWaiting:
	case sm.JobRunning:
		return TimerAlreadyFired, nil
	default:
		return TimerDropped, nil
	}
	if left := e.At.Sub(s.now()); left > 0 {
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
	ctx, turn, err := s.enterFiring(ctx)
	if err != nil {
		return "", err
	}
	defer turn.done()
	var c FireCounts
	if err := s.fireStart(ctx, e, &job, s.now(), &c); err != nil {
		return "", fmt.Errorf("start timer: %w", err)
	}
	switch {
	case c.Started > 0:
		return TimerFired, nil
	case c.Dropped > 0:
		return TimerDropped, nil
	}
	return TimerAlreadyFired, nil
}

// HandOffStart sends the timer message of a job's start due within
// TimerWindow, as the sweep's handoff would have on its next run: a
// submitter calls it so that a job starting in seconds does not wait for
// that run. Starts further ahead are left to the sweep. An error here
// costs only punctuality: the sweep hands off or fires the entry itself.
func (s *Firer) HandOffStart(ctx context.Context, owner, job string, at time.Time) error {
	now := s.now()
	if s.cfg.TimerQueue == "" || at.Sub(now) > TimerWindow {
		return nil
	}
	e := dynamo.IndexEntry{Job: job, Owner: owner, At: at}
	body, err := json.Marshal(timerBody(e, dynamo.StartBucket(job, at)))
	if err != nil {
		return fmt.Errorf("hand off start of job %s: %w", job, err)
	}
	if err := s.queue.SendBatch(ctx, s.cfg.TimerQueue, []queue.Send{{Body: string(body), Delay: timerDelay(at, now)}}); err != nil {
		return fmt.Errorf("hand off start of job %s: %w", job, err)
	}
	return nil
}
