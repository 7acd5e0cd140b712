package client

import (
	"encoding/json"
	"time"
)

// The API's answers, as shared/api/openapi.yaml describes them (each type
// is named after its schema there). They are the client's own, not the
// control plane's, so that a program importing the client does not link
// the control plane; a test checks that they carry every field the API
// sends, in the API's order.

// SubmitResult says which job a submission maps to: Created is false when
// the Idempotency-Key had already made it.
type SubmitResult struct {
	JobID   string `json:"jobId"`
	Created bool   `json:"created"`
	// StartAt is when a job created WAITING (SubmitOptions.At) starts.
	StartAt *time.Time `json:"startAt,omitempty"`
}

// JobStatus is a job's status.
type JobStatus struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	Manifest string `json:"manifest,omitempty"`
	// Output is the folder the job publishes its outputs to when it
	// succeeds (its spec's output, resolved).
	Output  string    `json:"output,omitempty"`
	Created time.Time `json:"created"`
	// StartAt is when a job submitted with SubmitOptions.At starts; it
	// is WAITING until then.
	StartAt  *time.Time `json:"startAt,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
	Ended    *time.Time `json:"ended,omitempty"`
	Progress Progress   `json:"progress"`
	// ETA is when the stages running now are expected to finish.
	ETA    *time.Time    `json:"eta,omitempty"`
	Stages []StageStatus `json:"stages"`
	// Limits are the concurrency limits a running job's tasks are under
	// and how much of each is in use.
	Limits []LimitUse `json:"limits,omitempty"`
	// FailedPartitions counts the tasks that failed within their stages'
	// toleratedFailures.
	FailedPartitions int `json:"failedPartitions,omitempty"`
	// Redrives counts the job's redrives (Redrive takes it); RerunOf is
	// the job it reruns.
	Redrives int    `json:"redrives,omitempty"`
	RerunOf  string `json:"rerunOf,omitempty"`
	// DataDeleted is when the job's data was deleted (DeleteData).
	DataDeleted *time.Time `json:"dataDeleted,omitempty"`
	// Params are the job's run parameters as resolved at submit.
	Params map[string]string `json:"params,omitempty"`
	// Cost is what the job's AWS requests cost so far (cost.go).
	Cost *JobCost `json:"cost,omitempty"`
}

// Done reports whether the job has ended: every state but WAITING,
// RUNNING and PUBLISHING (which ends by itself) is final.
func (s JobStatus) Done() bool {
	return s.State != "RUNNING" && s.State != "PUBLISHING" && s.State != "WAITING"
}

// LimitUse is one concurrency limit and its use.
type LimitUse struct {
	// Kind is "job" or "owner".
	Kind    string `json:"kind"`
	Max     int    `json:"max"`
	Running int    `json:"running"`
}

// Progress sums a job's work so far.
type Progress struct {
	TasksDone  int   `json:"tasksDone"`
	TasksTotal int   `json:"tasksTotal"`
	RecordsIn  int64 `json:"recordsIn"`
	RecordsOut int64 `json:"recordsOut"`
	// Rates are smoothed over the stages running now; nil until known.
	TasksPerSec   *float64 `json:"tasksPerSec,omitempty"`
	RecordsPerSec *float64 `json:"recordsPerSec,omitempty"`
}

// StageStatus is one stage's progress.
type StageStatus struct {
	Name      string `json:"name"`
	State     string `json:"state"`
	Total     int    `json:"total"`
	Committed int    `json:"committed"`
	// Attempts counts attempts that ended; Failures those that did not
	// commit.
	Attempts      int        `json:"attempts"`
	Failures      int        `json:"failures"`
	RecordsIn     int64      `json:"recordsIn"`
	RecordsOut    int64      `json:"recordsOut"`
	TasksPerSec   *float64   `json:"tasksPerSec,omitempty"`
	RecordsPerSec *float64   `json:"recordsPerSec,omitempty"`
	ETA           *time.Time `json:"eta,omitempty"`
	Started       *time.Time `json:"started,omitempty"`
	Ended         *time.Time `json:"ended,omitempty"`
	Error         string     `json:"error,omitempty"`
	// After names the stages this one runs after; Shuffle is the
	// partition count of the shuffle it writes for them.
	After       []string    `json:"after,omitempty"`
	Shuffle     int         `json:"shuffle,omitempty"`
	FailedTasks int         `json:"failedTasks,omitempty"`
	BadRecords  int64       `json:"badRecords,omitempty"`
	Copies      *CopyCounts `json:"copies,omitempty"`
	// Input is the prefix the stage reads, as resolved at submit.
	Input string `json:"input,omitempty"`
}

// CopyCounts counts a stage's speculative copies.
type CopyCounts struct {
	Launched int `json:"launched"`
	Won      int `json:"won"`
	Running  int `json:"running"`
}

// JobSummary is one job of a job list.
type JobSummary struct {
	ID      string     `json:"id"`
	Name    string     `json:"name"`
	State   string     `json:"state"`
	Created time.Time  `json:"created"`
	Ended   *time.Time `json:"ended,omitempty"`
}

// JobList is a page of jobs, newest first.
type JobList struct {
	Jobs       []JobSummary `json:"jobs"`
	NextCursor string       `json:"nextCursor,omitempty"`
}

// Task is a task with its attempts. ErrorClass is LastError's class;
// Memory the executor size an out-of-memory retry raised it to.
type Task struct {
	ID               string     `json:"id"`
	Stage            string     `json:"stage"`
	Partition        int        `json:"partition"`
	State            string     `json:"state"`
	Attempt          int        `json:"attempt"`
	MaxAttempts      int        `json:"maxAttempts"`
	LeaseUntil       *time.Time `json:"leaseUntil,omitempty"`
	NotBefore        *time.Time `json:"notBefore,omitempty"`
	CommittedAttempt int        `json:"committedAttempt,omitempty"`
	Outputs          int        `json:"outputs,omitempty"`
	RecordsIn        int64      `json:"recordsIn,omitempty"`
	RecordsOut       int64      `json:"recordsOut,omitempty"`
	LastError        string     `json:"lastError,omitempty"`
	ErrorClass       string     `json:"errorClass,omitempty"`
	// Tolerated: a FAILED task whose failure its stage tolerated.
	Tolerated  bool            `json:"tolerated,omitempty"`
	Memory     string          `json:"memory,omitempty"`
	Checkpoint *TaskCheckpoint `json:"checkpoint,omitempty"`
	Copy       *TaskCopy       `json:"copy,omitempty"`
	// TraceID is the trace its attempts' spans are in, when tracing was on.
	TraceID  string    `json:"traceId,omitempty"`
	Updated  time.Time `json:"updated"`
	Attempts []Attempt `json:"attempts"`
}

// TaskCheckpoint is a task's last checkpoint, which a retry or
// continuation resumes from.
type TaskCheckpoint struct {
	Attempt       int   `json:"attempt"`
	Offset        int64 `json:"offset"`
	Continuations int   `json:"continuations,omitempty"`
}

// TaskCopy is a task's speculative copy.
type TaskCopy struct {
	Attempt       int        `json:"attempt,omitempty"`
	HolderAttempt int        `json:"holderAttempt,omitempty"`
	Requested     time.Time  `json:"requested"`
	Started       *time.Time `json:"started,omitempty"`
	Live          bool       `json:"live"`
}

// Attempt is one attempt of a task.
type Attempt struct {
	Attempt  int        `json:"attempt"`
	Outcome  string     `json:"outcome"`
	At       *time.Time `json:"at,omitempty"`
	Error    string     `json:"error,omitempty"`
	Executor string     `json:"executor,omitempty"`
	Started  *time.Time `json:"started,omitempty"`
}

// TaskList is a page of a job's tasks.
type TaskList struct {
	Tasks      []Task `json:"tasks"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Event is one entry of a job's timeline.
type Event struct {
	At        time.Time `json:"at"`
	Type      string    `json:"type"`
	Stage     string    `json:"stage,omitempty"`
	Task      string    `json:"task,omitempty"`
	Partition *int      `json:"partition,omitempty"`
	Attempt   int       `json:"attempt,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// History is a page of a job's timeline, oldest first.
type History struct {
	Events     []Event `json:"events"`
	NextCursor string  `json:"nextCursor,omitempty"`
}

// Output is one committed output: the object Key in the job's bucket, and
// URL, a presigned GET URL, when asked for.
type Output struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
	Part      int    `json:"part"`
	Key       string `json:"key"`
	URL       string `json:"url,omitempty"`
	// Format is "parquet" for an output of a stage that writes Parquet
	// files (published as .parquet); empty for lines.
	Format string `json:"format,omitempty"`
}

// OutputList is a page of a job's committed outputs. Complete is true
// when they are the job's manifest (it succeeded); otherwise they are what
// committed so far.
type OutputList struct {
	Job        string     `json:"job"`
	State      string     `json:"state"`
	Complete   bool       `json:"complete"`
	Bucket     string     `json:"bucket"`
	Manifest   string     `json:"manifest,omitempty"`
	Outputs    []Output   `json:"outputs"`
	URLExpires *time.Time `json:"urlExpires,omitempty"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// BadRecord is one record a committed task rejected. Offset is its byte
// offset in the task's input, -1 when unknown; Omitted, on a task's last
// entry, counts its rejections counted but not kept.
type BadRecord struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
	Offset    int64  `json:"offset"`
	Record    string `json:"record"`
	Reason    string `json:"reason"`
	Omitted   int64  `json:"omitted,omitempty"`
}

// BadRecordPage is a page of a job's bad records; Counts are each stage's
// committed bad records.
type BadRecordPage struct {
	Job        string           `json:"job"`
	Records    []BadRecord      `json:"records"`
	Counts     map[string]int64 `json:"counts"`
	NextCursor string           `json:"nextCursor,omitempty"`
}

// LogLine is one log line; Fields is the line as its process logged it,
// a JSON object with at least time, level and msg.
type LogLine struct {
	Time   time.Time       `json:"time"`
	Fields json.RawMessage `json:"fields"`
}

// LogPage is a page of a job's log lines, oldest first. Next continues
// after them, including lines not written yet: it is set on the last page
// too, so a caller following a running job polls with it.
type LogPage struct {
	Lines []LogLine `json:"lines"`
	Next  string    `json:"next"`
}

// Identity is who the caller is to Batchwork and where its inputs go.
type Identity struct {
	Owner        string   `json:"owner"`
	OwnerKey     string   `json:"ownerKey"`
	Inputs       string   `json:"inputs"`
	InputBuckets []string `json:"inputBuckets"`
	// Endpoint is the S3 endpoint to upload through when it is not AWS's
	// (the local runner on an emulator).
	Endpoint string `json:"endpoint,omitempty"`
}

// JobDeletion is what DeleteJob deleted. Complete: nothing of the job is
// left.
type JobDeletion struct {
	Job      string `json:"job"`
	State    string `json:"state"`
	Objects  int    `json:"objects"`
	Records  int    `json:"records"`
	Complete bool   `json:"complete"`
}

// DataDeletion is what DeleteData deleted. DataDeleted is when the job's
// data was first asked to be deleted.
type DataDeletion struct {
	Job         string    `json:"job"`
	State       string    `json:"state"`
	DataDeleted time.Time `json:"dataDeleted"`
	Deleted     int       `json:"deleted"`
	Complete    bool      `json:"complete"`
}

// Schedule is a schedule: Spec is the job spec each firing submits,
// Expression a cron expression read in TimeZone or a rate. LastFired is
// the latest scheduled time handled, Next the upcoming firing.
type Schedule struct {
	ID    string          `json:"id,omitempty"`
	Owner string          `json:"owner,omitempty"`
	Name  string          `json:"name"`
	Spec  json.RawMessage `json:"spec"`
	// Params are run parameters every firing sets, beside its slot's
	// scheduledTime and scheduledDate.
	Params     map[string]string `json:"params,omitempty"`
	Expression string            `json:"expression"`
	TimeZone   string            `json:"timeZone,omitempty"`
	Start      time.Time         `json:"start,omitzero"`
	End        time.Time         `json:"end,omitzero"`
	// Overlap is skip, allow or cancelPrevious; CatchUp fireOnce or
	// skipMissed.
	Overlap   string     `json:"overlap,omitempty"`
	CatchUp   string     `json:"catchUp,omitempty"`
	Paused    bool       `json:"paused,omitempty"`
	CreatedAt time.Time  `json:"createdAt,omitzero"`
	LastFired *time.Time `json:"lastFired,omitempty"`
	Next      *time.Time `json:"next,omitempty"`
	LastJobID string     `json:"lastJobId,omitempty"`
}

// ScheduleList is a page of schedules, in creation order.
type ScheduleList struct {
	Schedules  []Schedule `json:"schedules"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// ScheduleRun is one entry of a schedule's history. Action is started,
// skipped or missed; Status is its job's current state.
type ScheduleRun struct {
	Scheduled   time.Time  `json:"scheduled"`
	Action      string     `json:"action"`
	StartedAt   *time.Time `json:"startedAt,omitempty"`
	JobID       string     `json:"jobId,omitempty"`
	Status      string     `json:"status,omitempty"`
	CatchUp     bool       `json:"catchUp,omitempty"`
	Through     *time.Time `json:"through,omitempty"`
	MissedCount int64      `json:"missedCount,omitempty"`
	Note        string     `json:"note,omitempty"`
}

// RunList is a page of a schedule's history, newest first.
type RunList struct {
	Runs       []ScheduleRun `json:"runs"`
	NextCursor string        `json:"nextCursor,omitempty"`
}
