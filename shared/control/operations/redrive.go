package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Redrive (issue 13.9) retries a FAILED job in place after a fix, the way
// a Step Functions Distributed Map redrive does: the job, its failed
// stage and the stages its end cancelled reopen, and only the tasks that
// did not finish run again (those that failed, were cancelled or never
// ran), each with a fresh budget of its stage's attempts. Committed tasks
// are never run again, completed stages stay completed, and failures a
// stage tolerated stay tolerated.
//
// Only a FAILED job is redriven. A CANCELLED one is not: its owner
// stopped it on purpose, and a redrive would undo that decision under
// the same job id that scripts may already treat as over; `rerun` runs it
// again as a new job that reuses its committed outputs. A job whose
// deadline has passed is not either (it would fail again at once), nor
// one whose data its owner deleted (the outputs downstream stages read
// are gone).

// RedriveRequest asks to redrive a FAILED job.
type RedriveRequest struct {
	Owner, ID string
	// Redrives is the number of redrives the caller saw on the job (its
	// status's redrives; nil: the job's count now). It is the request's
	// token: a repeated request (a retry after a lost answer) finds the
	// job already redriven past it and answers the job's status without
	// redriving it again.
	Redrives *int
}

// RedriveError is a redrive refused because of the job's state (the API
// answers 409 with Code).
type RedriveError struct {
	ID     string
	Code   string
	Reason string
	// Rerun: the refusal is a rerun's, not a redrive's.
	Rerun bool
}

func (e *RedriveError) Error() string {
	what := "redriven"
	if e.Rerun {
		what = "rerun"
	}
	return fmt.Sprintf("job %s cannot be %s: %s", e.ID, what, e.Reason)
}

// Redrive redrives a FAILED job; a repeated request (its Redrives one
// behind the job's) finishes the redrive it made instead.
func (s *Operator) Redrive(ctx context.Context, req RedriveRequest) error {
	j, err := s.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return err
	}
	count := len(j.Redrives)
	want := count
	if req.Redrives != nil {
		if want = *req.Redrives; want < 0 {
			return &spec.FieldError{Field: "redrives", Message: "must not be negative"}
		}
	}
	switch {
	case want == count-1:
		// This request's redrive happened (a retry after a lost answer):
		// finish its steps if the job still runs, never redrive again.
		if j.State == sm.JobRunning {
			if err := s.finishRedrive(ctx, j, count); err != nil {
				return err
			}
		}
		return nil
	case want != count:
		return &RedriveError{ID: j.ID, Code: "redrive_count",
			Reason: fmt.Sprintf("the request names redrive count %d but the job has been redriven %d times; look at its status again", want, count)}
	}
	if err := s.checkRedrivable(ctx, j); err != nil {
		return err
	}
	// First, while the job is still FAILED (so nothing acts on it), give
	// every unfinished task of its reopening stages its fresh attempt
	// budget: once the job runs again, an attempt stopped by its end
	// (whose lease the sweep then expires) or one that fails late must
	// retry, not fail the job again on an old budget. Refused when
	// another request redrove the job meanwhile, as the job's redrive
	// would be.
	err = s.raiseAttempts(ctx, j, count+1)
	if err == nil {
		now := s.Now()
		// A redriven job runs again, so it counts in its owner's quotas
		// again, under the limits a submission meets now: its end gave
		// its place back, and an owner at its limit waits as a submitter
		// would.
		quota := s.admit.JobQuota(req.Owner, j.Spec)
		err = s.store.JobRedrive(ctx, dynamo.RedriveJobParams{ID: j.ID, Count: count, Now: now, PrevError: kernel.Truncate(j.Error, kernel.MaxErrorLen),
			FollowUp: now.Add(s.cfg.StartGrace), Quota: quota})
		if errors.Is(err, dynamo.ErrQuotaReached) {
			return fmt.Errorf("redrive: %w", s.admit.QuotaError(ctx, req.Owner, quota))
		}
	}
	if errors.Is(err, sm.ErrInvalidTransition) {
		// Refused: or applied, and this is the SDK's retry of a write
		// whose answer was lost, or the same request made twice at once.
		// Either way a job now redriven count+1 times is this request's.
		now, gerr := s.OwnedJob(ctx, req.Owner, req.ID)
		if gerr != nil {
			return gerr
		}
		if len(now.Redrives) != count+1 || now.State != sm.JobRunning {
			return &RedriveError{ID: j.ID, Code: "redrive_conflict", Reason: "the job changed meanwhile (another redrive, or its data's deletion); look at its status again"}
		}
		err = nil
	}
	if err != nil {
		return err
	}
	s.NoteJobEnded(j.ID, "") // read it again here
	s.log.Info("job redriven", "job_id", j.ID, "redrive", count+1, "was", j.Error)
	j.State = sm.JobRunning
	return s.finishRedrive(ctx, j, count+1)
}

// checkRedrivable refuses a job a redrive cannot help, saying why.
func (s *Operator) checkRedrivable(ctx context.Context, j domain.Job) error {
	refuse := func(code, reason string) error { return &RedriveError{ID: j.ID, Code: code, Reason: reason} }
	switch j.State {
	case sm.JobFailed:
	case sm.JobRunning, sm.JobPublishing:
		return refuse("job_running", "it is "+string(j.State)+"; only a FAILED job can be redriven")
	case sm.JobSucceeded:
		return refuse("job_succeeded", "it SUCCEEDED; only a FAILED job can be redriven (rerun runs it again)")
	case sm.JobCancelled:
		return refuse("job_cancelled", "it was CANCELLED by its owner; only a FAILED job can be redriven (rerun runs it again as a new job, reusing its committed outputs)")
	default:
		return refuse("job_state", "it is "+string(j.State))
	}
	if !j.DataDeleted.IsZero() {
		return refuse("data_deleted", "its data was deleted; rerun it")
	}
	if d := kernel.JobDeadline(j); !d.IsZero() && !s.Now().Before(d) {
		return refuse("deadline_passed", "its deadline passed at "+d.UTC().Format(time.RFC3339)+"; rerun it")
	}
	stages, err := s.store.StageList(ctx, j.ID)
	if err != nil {
		return err
	}
	for _, st := range stages {
		if st.State == sm.StageFailed || st.State == sm.StageCancelled {
			return nil
		}
	}
	return refuse("nothing_to_redrive", "every stage completed (it failed publishing its outputs); rerun it")
}

// finishRedrive reopens the stages and tasks of a job's redrive gen (its
// redrive count after it). Every step is a conditional write that a
// repeat skips, so a redrive cut short (a crash, a timeout) is finished
// by the request's retry, which names the same redrive count, or by the
// sweep; a task that had the redrive's steps is not touched again, as
// what it did since is the new generation's.
func (s *Operator) finishRedrive(ctx context.Context, j domain.Job, gen int) error {
	sp := j.Spec
	now := s.Now()
	list, err := s.store.StageList(ctx, j.ID)
	if err != nil {
		return err
	}
	for _, st := range list {
		if st.State != sm.StageFailed && st.State != sm.StageCancelled {
			continue
		}
		ev, due := sm.StageRedrive, now.Add(s.cfg.CheckEvery)
		if st.Started.IsZero() {
			ev, due = sm.StageRedriveBlocked, time.Time{}
		}
		if err := kernel.IgnoreInvalid(s.store.StageRedrive(ctx, j.ID, st.Index, ev, now, due)); err != nil {
			return err
		}
	}
	if list, err = s.store.StageList(ctx, j.ID); err != nil {
		return err
	}
	// Every process trusts a job state it read for JobStateTTL: one that
	// read FAILED just before the redrive would cancel a task it claimed
	// (and stop it at its job watch) until then. Redriven tasks wait that
	// long, from now (after the job's write), before anyone may claim
	// them.
	now = s.Now()
	notBefore := now.Add(s.JobStateTTL() + sm.LeaseSkew)
	for _, st := range list {
		if st.State != sm.StageRunning {
			continue
		}
		if err := s.redriveTasks(ctx, sp, st, gen, now, notBefore); err != nil {
			return err
		}
		if !st.Materialized {
			// Its job ended while it was being materialized: finish that
			// (every step of it is idempotent), which also completes it
			// if nothing is left to run.
			if err := s.stages.Materialize(ctx, j.ID, sp, st.Index); err != nil {
				return err
			}
			continue
		}
		if err := s.stages.CheckStageComplete(ctx, j.ID, st.Index); err != nil {
			return err
		}
	}
	// Stages the job's end cancelled before they started wait for their
	// upstream again; those whose upstream has completed start now.
	state := func(i int) sm.StageState { return list[i].State }
	for _, st := range list {
		if st.State == sm.StageBlocked && stages.UpstreamCompleted(sp, st.Index, state) {
			if err := s.stages.StartStage(ctx, j.ID, sp, st.Index); err != nil {
				return err
			}
		}
	}
	return nil
}

// raiseAttempts readies the tasks of a FAILED job for its redrive gen
// (dynamo.Store.TaskMarkRedrive): the unfinished tasks of its failed and
// cancelled stages get their stage's attempts again, and the failed
// tasks of every stage the redrive reopens or finds running are marked
// as its to put back. sm.ErrInvalidTransition: the job was redriven
// meanwhile, by another request.
func (s *Operator) raiseAttempts(ctx context.Context, j domain.Job, gen int) error {
	stages, err := s.store.StageList(ctx, j.ID)
	if err != nil {
		return err
	}
	for _, st := range stages {
		reopens := st.State == sm.StageFailed || st.State == sm.StageCancelled
		if (!reopens && st.State != sm.StageRunning) || st.Total == 0 {
			continue
		}
		tasks, err := s.store.TaskListStage(ctx, j.ID, st.Index, st.Total)
		if err != nil {
			return err
		}
		// An unwritten task (sm.TaskUnwritten) needs nothing: its
		// first claim writes it with the stage's attempts.
		budget := j.Spec.StageRetry(st.Index).MaxAttempts
		for _, t := range tasks {
			switch {
			case reopens && (t.State == sm.TaskClaimed || t.State == sm.TaskReady):
				// Its stopped attempt may still fail before the job
				// runs again: then it is marked too.
				if err := s.store.TaskMarkRedrive(ctx, t.Ref, budget, gen); err != nil {
					return err
				}
			case t.State == sm.TaskFailed && !t.Tolerated:
				if err := s.store.TaskMarkRedrive(ctx, t.Ref, 0, gen); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// redriveTasks puts the unfinished tasks of a list stage back to
// READY with a fresh budget of the stage's attempts and sends their
// messages, delayed until notBefore. A running task (its attempt was
// stopped by the job's end, and the sweep takes it back when its lease
// runs out) gets the budget too.
func (s *Operator) redriveTasks(ctx context.Context, sp *spec.Job, st domain.Stage, gen int, now, notBefore time.Time) error {
	if st.Total == 0 {
		return nil
	}
	tasks, err := s.store.TaskListStage(ctx, st.Job, st.Index, st.Total)
	if err != nil {
		return err
	}
	budget := sp.StageRetry(st.Index).MaxAttempts
	tasks = dynamo.WithUnwrittenOf(tasks, st, budget)
	var msgs []queue.Send
	var sizes []spec.Size // parallel to msgs: each task's raised size (kernel/sizedqueues.go)
	for _, t := range tasks {
		switch {
		case t.Unwritten:
			// Never claimed (sm.TaskUnwritten): its message may have
			// gone while the job was ended (dropped from the
			// dead-letter queue); another is harmless, as a duplicate
			// is refused at claim.
			msgs = append(msgs, queue.Send{Body: t.Ref.String(), Delay: notBefore.Sub(now)})
			sizes = append(sizes, t.Memory)
		case t.State == sm.TaskClaimed:
			if err := s.store.TaskRaiseAttempts(ctx, t.Ref, budget, gen); err != nil {
				return err
			}
		case t.State == sm.TaskReady || t.State == sm.TaskCancelled || (t.State == sm.TaskFailed && !t.Tolerated):
			err := s.store.TaskRedrive(ctx, t.Ref, budget, gen, now, notBefore, notBefore.Add(s.cfg.StuckAfter))
			if errors.Is(err, sm.ErrInvalidTransition) {
				continue // it moved on meanwhile, or it had this redrive
			}
			if err != nil {
				return err
			}
			msgs = append(msgs, queue.Send{Body: t.Ref.String(), Delay: notBefore.Sub(now)})
			sizes = append(sizes, t.Memory)
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	urls, groups := s.GroupBySize(sp, st.Index, msgs, sizes)
	for _, url := range urls {
		if err := s.queue.SendBatch(ctx, url, groups[url]); err != nil {
			return fmt.Errorf("redrive stage %s/%s: %w", st.Job, st.Name, err)
		}
	}
	s.log.Info("stage redriven", "job_id", st.Job, "stage", st.Name, "tasks", len(msgs))
	return nil
}

// SweepRedrive finishes the steps of a redrive whose caller stopped
// short (the sweep's look at a redriven job, StartGrace after it).
func (s *Operator) SweepRedrive(ctx context.Context, j domain.Job) error {
	if len(j.Redrives) == 0 || j.State != sm.JobRunning {
		return nil
	}
	return s.finishRedrive(ctx, j, len(j.Redrives))
}
