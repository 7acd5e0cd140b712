package control

// Operations on jobs (cancel, redrive, rerun, deletion, retention) live
// in operations; these names keep their callers' spelling, and the routes
// that answer with the job's status read it here.

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/control/readside"
)

type (
	// JobEndedError refuses the cancel of an ended or publishing job.
	JobEndedError = operations.JobEndedError
	// RedriveRequest asks to redrive a FAILED job.
	RedriveRequest = operations.RedriveRequest
	// RedriveError is a redrive or rerun refused because of the job's state.
	RedriveError = operations.RedriveError
	// RerunRequest asks to rerun an ended job.
	RerunRequest = operations.RerunRequest
	// JobDeletion is the answer of DeleteJob.
	JobDeletion = operations.JobDeletion
	// JobNotEndedError refuses the deletion of a job that has not ended.
	JobNotEndedError = operations.JobNotEndedError
	// DataDeletion is the answer of DeleteData.
	DataDeletion = operations.DataDeletion
	// JobRunningError refuses the deletion of a running job's data.
	JobRunningError = operations.JobRunningError
	// DataDeletedError is what reads of a job's deleted data answer.
	DataDeletedError = readside.DataDeletedError
)

// Deletion steps, in order, as DeleteStepHook sees them.
const (
	DeleteStepMarked  = operations.DeleteStepMarked
	DeleteStepData    = operations.DeleteStepData
	DeleteStepRecords = operations.DeleteStepRecords
)

var (
	// ErrJobEnded means the job already finished, so it cannot be cancelled.
	ErrJobEnded = operations.ErrJobEnded
	// ErrJobRunning means the job has not ended, so it cannot be deleted.
	ErrJobRunning = operations.ErrJobRunning
	// ErrDataDeleted is what reads of a job's deleted data answer.
	ErrDataDeleted = readside.ErrDataDeleted
)

// Cancel ends a running job as CANCELLED and returns its status
// (operations.Operator.Cancel).
func (s *Service) Cancel(ctx context.Context, owner, id string) (JobStatus, error) {
	if err := s.Operator.Cancel(ctx, owner, id); err != nil {
		return JobStatus{}, err
	}
	return s.Status(ctx, owner, id)
}

// Redrive redrives a FAILED job and returns its status
// (operations.Operator.Redrive).
func (s *Service) Redrive(ctx context.Context, req RedriveRequest) (JobStatus, error) {
	if err := s.Operator.Redrive(ctx, req); err != nil {
		return JobStatus{}, err
	}
	return s.Status(ctx, req.Owner, req.ID)
}
