package control

import (
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
	Event             = readside.Event
	History           = readside.History
	HistoryRequest    = readside.HistoryRequest
	OutputsRequest    = readside.OutputsRequest
	OutputInfo        = readside.OutputInfo
	OutputList        = readside.OutputList
)

// Timeline event types (readside.Event).
const (
	EventJobSubmitted    = readside.EventJobSubmitted
	EventStageStarted    = readside.EventStageStarted
	EventTaskRetried     = readside.EventTaskRetried
	EventTaskLeaseExpire = readside.EventTaskLeaseExpire
	EventTaskFailed      = readside.EventTaskFailed
)

// PresignTTL is how long a presigned output URL stays valid.
const PresignTTL = readside.PresignTTL

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

var (
	// ErrLogsUnavailable means this installation has no log source.
	ErrLogsUnavailable = readside.ErrLogsUnavailable
	// ErrPresignUnavailable: this installation cannot presign URLs.
	ErrPresignUnavailable = readside.ErrPresignUnavailable
)

// SetLogSource sets where JobLogs reads lines (Config.Logs), for a main
// that builds its source after the service; call it before serving.
func (s *Service) SetLogSource(src logs.Source) {
	s.cfg.Logs = src
	s.Reader.SetLogSource(src)
}

var _ readside.Kernel = (*kernel.Kernel)(nil)

var (
	_ readside.Store = Store(nil)
	_ readside.Blob  = Blob(nil)
)
