package operations

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrJobRunning means the job has not ended, so its data cannot be
// deleted: its tasks may still be reading and writing it.
var ErrJobRunning = errors.New("job is still running")

// JobRunningError names the running job.
type JobRunningError struct{ ID string }

func (e *JobRunningError) Error() string {
	return fmt.Sprintf("job %s is RUNNING; only an ended job's data can be deleted (cancel it, or wait for it to end)", e.ID)
}
func (e *JobRunningError) Unwrap() error { return ErrJobRunning }

// deletePagesPerCall bounds one DeleteData call: 10 listing pages and 10
// DeleteObjects requests, 10,000 objects, a few seconds on S3, inside the
// API's 29 s. A job with more answers Complete false and the caller calls
// again (the CLI does).
const deletePagesPerCall = 10

// DataDeletion is the answer of DeleteData.
type DataDeletion struct {
	Job   string `json:"job"`
	State string `json:"state"`
	// DataDeleted is when the job's data was first asked to be deleted.
	DataDeleted time.Time `json:"dataDeleted"`
	// Deleted counts the objects this call deleted.
	Deleted int `json:"deleted"`
	// Complete is true when nothing is left; false when the call stopped
	// at its budget, and the caller should call again.
	Complete bool `json:"complete"`
}

// DeleteData deletes every object of an ended job of owner's (its plans,
// outputs and manifests: blob.JobPrefix) and records the deletion on the
// job, so its outputs answer readside.ErrDataDeleted from then on. Another owner's
// job is not found, as on every route; a running job is a
// *JobRunningError. It is idempotent: a call repeated after a failure, a
// lost answer or an incomplete call deletes what is left and keeps the
// first deletion's time. The job's records (status, tasks, history) stay.
//
// An attempt that was running when its job was cancelled or failed may
// still publish its outputs before it notices (at its next heartbeat); a
// later call deletes those too.
func (s *Operator) DeleteData(ctx context.Context, owner, id string) (DataDeletion, error) {
	j, err := s.OwnedJob(ctx, owner, id)
	if err != nil {
		return DataDeletion{}, err
	}
	if !sm.Jobs.IsTerminal(j.State) {
		return DataDeletion{}, &JobRunningError{ID: id}
	}
	at := j.DataDeleted
	if at.IsZero() {
		// Recorded before any object goes: once one is gone, the outputs
		// route must say why, whatever becomes of this call.
		at, err = s.store.JobMarkDataDeleted(ctx, id, s.Now())
		if errors.Is(err, sm.ErrInvalidTransition) {
			return DataDeletion{}, &JobRunningError{ID: id}
		}
		if err != nil {
			return DataDeletion{}, err
		}
	}
	res, err := s.blob.DeletePrefix(ctx, blob.JobPrefix(id), deletePagesPerCall)
	if err != nil {
		return DataDeletion{}, fmt.Errorf("delete the data of job %s: %w", id, err)
	}
	s.log.Info("job data deleted", "job_id", id, "owner", owner, "objects", res.Deleted, "complete", res.Complete)
	return DataDeletion{Job: id, State: string(j.State), DataDeleted: at, Deleted: res.Deleted, Complete: res.Complete}, nil
}
