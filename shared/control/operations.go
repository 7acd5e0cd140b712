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
	if err := s.ops.Cancel(ctx, owner, id); err != nil {
		return JobStatus{}, err
	}
	return s.Status(ctx, owner, id)
}

// Redrive redrives a FAILED job and returns its status
// (operations.Operator.Redrive).
func (s *Service) Redrive(ctx context.Context, req RedriveRequest) (JobStatus, error) {
	if err := s.ops.Redrive(ctx, req); err != nil {
		return JobStatus{}, err
	}
	return s.Status(ctx, req.Owner, req.ID)
}

// Rerun submits the rerun of an ended job (operations.Operator.Rerun).
func (s *Service) Rerun(ctx context.Context, req RerunRequest) (SubmitResult, error) {
	return s.ops.Rerun(ctx, req)
}

// DeleteJob deletes an ended job of owner's, its objects and its records
// (operations.Operator.DeleteJob).
func (s *Service) DeleteJob(ctx context.Context, owner, id string) (JobDeletion, error) {
	return s.ops.DeleteJob(ctx, owner, id)
}

// DeleteData deletes every object of an ended job of owner's
// (operations.Operator.DeleteData).
func (s *Service) DeleteData(ctx context.Context, owner, id string) (DataDeletion, error) {
	return s.ops.DeleteData(ctx, owner, id)
}
