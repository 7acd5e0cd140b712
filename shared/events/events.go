// Package events is Batchwork's EventBridge events: what they say, and the
// publisher that puts them on the installation's bus.
//
// Events never sit on a commit's critical path and are never lost: each
// one is an outbox record written in the same DynamoDB transaction as the
// state change it reports (shared/dynamo, outbox.go), so it exists exactly
// when the change happened. The process that made the change publishes it
// right after its transaction, best effort (an error is logged, never
// returned to the caller), and the sweep publishes whatever is left: the
// outbox record carries a due time, so the sweep's sparse index finds it.
// A record is deleted once EventBridge and every other destination (a
// Sink: the OpenLineage endpoint, shared/lineage) accepted it; a
// destination that accepted it is noted on the record and not asked again.
//
// Delivery is at least once: a publisher that dies between PutEvents and
// the delete, or two publishers racing on one record, put an event twice.
// Every event's detail carries a stable eventId (the same on every copy);
// consumers that must act once dedupe on it.
package events

import (
	"fmt"
	"strconv"
	"time"
)

// Source is the source of every Batchwork event.
const Source = "batchwork"

// Detail types.
const (
	JobSubmitted = "Batchwork Job Submitted"
	// JobStarted: a job submitted with a start time (WAITING) started.
	JobStarted     = "Batchwork Job Started"
	JobSucceeded   = "Batchwork Job Succeeded"
	JobFailed      = "Batchwork Job Failed"
	JobCancelled   = "Batchwork Job Cancelled"
	StageCompleted = "Batchwork Stage Completed"
	TaskFailed     = "Batchwork Task Failed"
)

// Event is one event: its stable id, detail type and detail.
type Event struct {
	ID         string
	DetailType string
	Time       time.Time
	Detail     Detail
	// Delivered names the destinations that accepted the event already
	// (BusDestination, Sink.Name), as its outbox record says.
	Delivered []string
}

// Detail is an event's detail (EventBridge's "detail" field). Fields that
// do not apply to a detail type are left out.
type Detail struct {
	// EventID is the same on every delivery of one event: consumers dedupe
	// on it (delivery is at least once).
	EventID string `json:"eventId"`
	Owner   string `json:"owner"`
	JobID   string `json:"jobId"`
	JobName string `json:"jobName,omitempty"`
	// State is the job's state after the change (RUNNING, SUCCEEDED,
	// FAILED, CANCELLED) for job events.
	State string `json:"state,omitempty"`
	// Stage and StageIndex name the stage of stage and task events.
	Stage      string `json:"stage,omitempty"`
	StageIndex *int   `json:"stageIndex,omitempty"`
	// Partition and Attempts identify a failed task and how many attempts
	// it made.
	Partition *int `json:"partition,omitempty"`
	Attempts  int  `json:"attempts,omitempty"`
	// Error is why a job or task failed, or why a job was cancelled.
	Error string `json:"error,omitempty"`
	// Manifest is a succeeded job's manifest key in the data bucket.
	Manifest string  `json:"manifest,omitempty"`
	Counts   *Counts `json:"counts,omitempty"`
	// Time is when the change happened (RFC 3339, milliseconds).
	Time string `json:"time"`
}

// Counts are a job's or a stage's sizes when the event happened.
type Counts struct {
	Stages          int `json:"stages,omitempty"`
	StagesCompleted int `json:"stagesCompleted,omitempty"`
	Tasks           int `json:"tasks,omitempty"`
	TasksCommitted  int `json:"tasksCommitted,omitempty"`
	// TasksFailed counts the failed tasks of completed stages, which
	// their toleratedFailures allowed: a job that SUCCEEDED with them
	// lacks those partitions' outputs (its manifest lists them).
	TasksFailed int `json:"tasksFailed,omitempty"`
}

// Stable event ids: each names a change that happens at most once, so a
// repeated write of the same change's outbox record is the same record.
func SubmittedID(job string) string { return job + ".submitted" }

// StartedID is the id of the event that a WAITING job started (once: a
// job leaves WAITING once).
func StartedID(job string) string { return job + ".started" }

// EndedID is the id of the event that a job ended the first time.
func EndedID(job string) string { return job + ".ended" }

// JobEndedID is the id of the event that a job ended after redrives
// redrives (EndedID when it was never redriven). A redriven job ends
// again, and consumers that dedupe on the id must not drop that second
// ending as a copy of the first: each redrive generation ends once, so
// the id is stable for the retries of one ending's publication and new
// for the next.
func JobEndedID(job string, redrives int) string {
	if redrives == 0 {
		return EndedID(job)
	}
	return job + ".ended.r" + strconv.Itoa(redrives)
}

// StageCompletedID is the id of a stage's completion event.
func StageCompletedID(job string, stage int) string {
	return job + ".stage." + strconv.Itoa(stage) + ".completed"
}

// TaskFailedID is the id of a task's final failure event, at attempt
// (the attempt that failed it). A redrive puts a failed task back with
// more attempts, so it can fail again, always at a higher attempt: the
// attempt makes each failure's id its own, and every retry of one
// failure's publication carries the same one.
func TaskFailedID(job string, stage, partition, attempt int) string {
	return fmt.Sprintf("%s.task.%d.%d.a%d.failed", job, stage, partition, attempt)
}

// TimeString formats an event time.
func TimeString(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// New returns an event with its id and time copied into the detail.
func New(id, detailType string, at time.Time, d Detail) Event {
	d.EventID = id
	d.Time = TimeString(at)
	return Event{ID: id, DetailType: detailType, Time: at.UTC(), Detail: d}
}

// JobEndedType is the detail type of a job that ended in state.
func JobEndedType(state string) string {
	switch state {
	case "SUCCEEDED":
		return JobSucceeded
	case "CANCELLED":
		return JobCancelled
	}
	return JobFailed
}

// Int returns a pointer to n, for Detail's optional indexes.
func Int(n int) *int { return &n }
