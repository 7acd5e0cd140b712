package control

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/page"
	"github.com/batchwork/batchwork/shared/control/readside"
	"github.com/batchwork/batchwork/shared/logs"
)

// The read routes live in readside; these names keep their callers'
// spelling.
type (
	JobStatus         = readside.JobStatus
	LimitUse          = readside.LimitUse
	Progress          = readside.Progress
	StageStatus       = readside.StageStatus
	CopyCounts        = readside.CopyCounts
	CopyInfo          = readside.CopyInfo
	Rate              = readside.Rate
	ListJobsRequest   = readside.ListJobsRequest
	JobSummary        = readside.JobSummary
	JobList           = readside.JobList
	ListTasksRequest  = readside.ListTasksRequest
	TaskInfo          = readside.TaskInfo
	AttemptInfo       = readside.AttemptInfo
	TaskList          = readside.TaskList
	CheckpointInfo    = readside.CheckpointInfo
	LogsRequest       = readside.LogsRequest
	BadRecordsRequest = readside.BadRecordsRequest
	BadRecordPage     = readside.BadRecordPage
)

// Outcomes of a task's attempts as ListTasks shows them.
const (
	OutcomeRunning      = readside.OutcomeRunning
	OutcomeCommitted    = readside.OutcomeCommitted
	OutcomeRetried      = readside.OutcomeRetried
	OutcomeLeaseExpired = readside.OutcomeLeaseExpired
	OutcomeFailed       = readside.OutcomeFailed
	OutcomeCancelled    = readside.OutcomeCancelled
	OutcomeUnknown      = readside.OutcomeUnknown
)

// Page sizes of the list routes.
const (
	DefaultPageSize = page.DefaultSize
	MaxPageSize     = page.MaxSize
)

// ErrLogsUnavailable means this installation has no log source.
var ErrLogsUnavailable = readside.ErrLogsUnavailable

// Status reads a job's status (readside.Reader.Status).
func (s *Service) Status(ctx context.Context, owner, id string) (JobStatus, error) {
	return s.reads.Status(ctx, owner, id)
}

// ListJobs lists the owner's jobs, newest first.
func (s *Service) ListJobs(ctx context.Context, req ListJobsRequest) (JobList, error) {
	return s.reads.ListJobs(ctx, req)
}

// ListTasks lists a job's tasks with their attempts.
func (s *Service) ListTasks(ctx context.Context, req ListTasksRequest) (TaskList, error) {
	return s.reads.ListTasks(ctx, req)
}

// JobLogs returns a page of the caller's job's log lines.
func (s *Service) JobLogs(ctx context.Context, req LogsRequest) (logs.Page, error) {
	return s.reads.JobLogs(ctx, req)
}

// SetLogSource sets where JobLogs reads lines (Config.Logs), for a main
// that builds its source after the service; call it before serving.
func (s *Service) SetLogSource(src logs.Source) {
	s.cfg.Logs = src
	s.reads.SetLogSource(src)
}

// BadRecords returns a page of the records a job's committed attempts
// rejected.
func (s *Service) BadRecords(ctx context.Context, req BadRecordsRequest) (BadRecordPage, error) {
	return s.reads.BadRecords(ctx, req)
}

var _ readside.Kernel = (*kernel.Kernel)(nil)

var (
	_ readside.Store = Store(nil)
	_ readside.Blob  = Blob(nil)
)
