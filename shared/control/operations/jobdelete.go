package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// JobNotEndedError: only an ended job can be deleted. It unwraps to
// ErrJobRunning.
type JobNotEndedError struct {
	ID    string
	State sm.JobState
}

func (e *JobNotEndedError) Error() string {
	return fmt.Sprintf("job %s is %s; only an ended job can be deleted (cancel it, or wait for it to end)", e.ID, e.State)
}
func (e *JobNotEndedError) Unwrap() error { return ErrJobRunning }

// Deletion steps, in order, as the step hook (control.Service.DeleteStepHook)
// sees them.
const (
	DeleteStepMarked  = "marked"  // the job is marked deleting and out of its owner's list
	DeleteStepData    = "data"    // its objects are gone
	DeleteStepRecords = "records" // its records but the job item are gone
)

// recordsPerCall bounds the records one DeleteJob call deletes: 50
// transactions of 100 deletes, a few seconds, inside the API's 29 s with
// the objects' share (deletePagesPerCall). A larger job answers Complete
// false and the caller calls again (the CLI does).
const recordsPerCall = 5000

// JobDeletion is the answer of DeleteJob.
type JobDeletion struct {
	Job string `json:"job"`
	// State is the state the job ended in.
	State string `json:"state"`
	// Objects and Records count what this call deleted.
	Objects int `json:"objects"`
	Records int `json:"records"`
	// Complete is true when nothing of the job is left: a later DELETE
	// or GET is a 404. False when the call stopped at its budget; the
	// caller calls again.
	Complete bool `json:"complete"`
}

// DeleteJob deletes an ended job of owner's: its objects under
// jobs/<id>/ (plans, outputs, manifests; DeleteData) and every record of
// it (job, stages, tasks, counters, attempt ends, timeline, state copies,
// slots, its entry in the owner's job list and its idempotency record).
// The folder it published to (its spec's output) is the owner's and
// stays, as do its inputs. Another owner's job is not found, and so is a
// job already deleted; a RUNNING or PUBLISHING job is a *JobNotEndedError.
//
// The steps (dynamo/jobdelete.go): mark the job deleting, with a write
// guarded on its having ended, which also takes it out of its owner's list
// (every route answers 404 for it from then on); delete its objects; its
// records; its job item, last. Each step is idempotent, so a call that
// failed or stopped half-way (a crash, a lost answer, the budget) is
// finished by a repeat: a repeat finds the marked job by its job item,
// which still names its owner.
func (s *Operator) DeleteJob(ctx context.Context, owner, id string) (JobDeletion, error) {
	if !kernel.JobIDPattern.MatchString(id) {
		return JobDeletion{}, &spec.FieldError{Field: "id", Message: "is not a job id"}
	}
	// Not OwnedJob: a job marked deleting is found here, and only here.
	j, err := s.store.JobGet(ctx, id)
	if err != nil {
		return JobDeletion{}, err
	}
	if j.Owner != owner {
		return JobDeletion{}, fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
	}
	if !sm.Jobs.IsTerminal(j.State) {
		return JobDeletion{}, &JobNotEndedError{ID: id, State: j.State}
	}
	res := JobDeletion{Job: id, State: string(j.State)}
	log := s.log.With("job_id", id, "owner", owner)
	if j.Deleting.IsZero() {
		err := s.store.JobMarkDeleting(ctx, id, owner, s.Now())
		if errors.Is(err, sm.ErrInvalidTransition) {
			return JobDeletion{}, &JobNotEndedError{ID: id, State: j.State}
		}
		if err != nil {
			return JobDeletion{}, err
		}
		res.Records++ // its entry in its owner's list
		log.Info("job deletion started")
	}
	if err := s.deleteStep(id, DeleteStepMarked); err != nil {
		return res, err
	}
	objs, err := s.blob.DeletePrefix(ctx, blob.JobPrefix(id), deletePagesPerCall)
	res.Objects = objs.Deleted
	if err != nil {
		return res, fmt.Errorf("delete the data of job %s: %w", id, err)
	}
	if !objs.Complete {
		log.Info("job deletion in progress", "objects", res.Objects)
		return res, nil
	}
	if err := s.deleteStep(id, DeleteStepData); err != nil {
		return res, err
	}
	if err := s.settleBeforeRecords(ctx, j); err != nil {
		return res, err
	}
	n, complete, err := s.store.JobDeleteRecords(ctx, id, recordsPerCall)
	res.Records += n
	if err != nil || !complete {
		log.Info("job deletion in progress", "objects", res.Objects, "records", n)
		return res, err
	}
	if err := s.deleteStep(id, DeleteStepRecords); err != nil {
		return res, err
	}
	n, err = s.store.JobDeleteItem(ctx, id)
	res.Records += n
	if err != nil {
		return res, err
	}
	res.Complete = true
	log.Info("job deleted", "objects", res.Objects, "records", res.Records)
	return res, nil
}

// DeleteSettle is how long past a job's end plus JobStateTTL its records
// stay: the margin for clock skew between the process that ended the job
// and the one deleting it, and for a request on its way.
const DeleteSettle = 2 * time.Second

// settleBeforeRecords waits, when the job ended moments ago, until no
// process can still be acting on a RUNNING state it read: a claim trusts
// such a state for JobStateTTL (kernel/jobstate.go), and a first claim of an
// unwritten task writes its task record (control's tasks.go). A record written after
// the deletion's pass over the job's records would outlive the job. The
// wait is at most JobStateTTL and DeleteSettle, inside the API's time.
func (s *Operator) settleBeforeRecords(ctx context.Context, j domain.Job) error {
	if j.Ended.IsZero() {
		return nil
	}
	wait := j.Ended.Add(s.cfg.JobStateTTL + DeleteSettle).Sub(s.Now())
	if wait <= 0 {
		return nil
	}
	if err := s.Sleep(ctx, wait); err != nil {
		return fmt.Errorf("delete the records of job %s: %w", j.ID, err)
	}
	return nil
}

// deleteStep calls the step hook (control.Service.DeleteStepHook), if
// any, after a step of a deletion.
func (s *Operator) deleteStep(id, step string) error {
	if s.stepHook == nil {
		return nil
	}
	return s.stepHook(id, step)
}
