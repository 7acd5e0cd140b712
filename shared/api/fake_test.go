package api

import (
	"context"
	"errors"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// scripted is a control plane that answers from a script: the tests here
// are about the HTTP layer (routing, parameters, status codes, error
// bodies, the document), and drive it into outcomes the real control plane
// only reaches under failure (an internal error). The control plane itself
// is tested against the emulator in package integration. It answers every
// route (its methods are beside each route's tests), so every test runs on
// the whole API.
type scripted struct {
	err error // returned by every call when set
	// last records the last request, to check parameters reach it.
	last any
}

var _ Service = (*scripted)(nil)

const fakeID = "j0123456789a0123456789"

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

func (s *scripted) Submit(_ context.Context, req control.SubmitRequest) (control.SubmitResult, error) {
	s.last = req
	if s.err != nil {
		return control.SubmitResult{}, s.err
	}
	if req.IdempotencyKey == "" {
		return control.SubmitResult{}, &spec.FieldError{Field: "idempotencyKey", Message: "is required"}
	}
	if _, err := spec.Parse(req.Spec); err != nil {
		return control.SubmitResult{}, err
	}
	return control.SubmitResult{JobID: fakeID, Created: req.IdempotencyKey != "again"}, nil
}

func fullStatus(state string) control.JobStatus {
	return control.JobStatus{
		ID: fakeID, Name: "wc", State: state, Error: "stage \"map\" task 3 failed after 3 attempts: boom",
		Manifest: "jobs/" + fakeID + "/manifest.json", Created: t0, Started: ptr(t0.Add(time.Second)), Ended: ptr(t0.Add(time.Minute)),
		Progress: control.Progress{TasksDone: 3, TasksTotal: 24, RecordsIn: 100, RecordsOut: 7, TasksPerSec: ptr(1.5), RecordsPerSec: ptr(50.0)},
		ETA:      ptr(t0.Add(2 * time.Minute)),
		Stages: []control.StageStatus{{
			Name: "map", State: "RUNNING", Total: 20, Committed: 3, Attempts: 4, Failures: 1, RecordsIn: 100, RecordsOut: 40,
			TasksPerSec: ptr(1.5), RecordsPerSec: ptr(50.0), ETA: ptr(t0.Add(2 * time.Minute)), Started: ptr(t0), Ended: ptr(t0.Add(time.Minute)), Error: "x",
		}, {Name: "reduce", State: "BLOCKED"}},
		Limits: []control.LimitUse{{Kind: "job", Max: 4, Running: 4}, {Kind: "owner", Max: 200, Running: 17}},
	}
}

func (s *scripted) Status(_ context.Context, owner, id string) (control.JobStatus, error) {
	s.last = [2]string{owner, id}
	if s.err != nil {
		return control.JobStatus{}, s.err
	}
	return fullStatus("RUNNING"), nil
}

func (s *scripted) ListJobs(_ context.Context, req control.ListJobsRequest) (control.JobList, error) {
	s.last = req
	if s.err != nil {
		return control.JobList{}, s.err
	}
	return control.JobList{Jobs: []control.JobSummary{
		{ID: fakeID, Name: "wc", State: "SUCCEEDED", Created: t0, Ended: ptr(t0.Add(time.Minute))},
		{ID: "j0123456789a0123456780", Name: "wc", State: "RUNNING", Created: t0},
	}, NextCursor: "abc"}, nil
}

func (s *scripted) ListTasks(_ context.Context, req control.ListTasksRequest) (control.TaskList, error) {
	s.last = req
	if s.err != nil {
		return control.TaskList{}, s.err
	}
	return control.TaskList{Tasks: []control.TaskInfo{{
		ID: fakeID + "/0/1", Stage: "map", Partition: 1, State: "SUCCEEDED", Attempt: 2, MaxAttempts: 3,
		LeaseUntil: ptr(t0), NotBefore: ptr(t0), CommittedAttempt: 2, Outputs: 4, RecordsIn: 10, RecordsOut: 20,
		LastError: "boom", Updated: t0,
		Attempts: []control.AttemptInfo{{Attempt: 1, Outcome: "retried", At: ptr(t0), Error: "boom"}, {Attempt: 2, Outcome: "committed", At: ptr(t0), Executor: "0123abcd", Started: ptr(t0)}},
	}}, NextCursor: "abc"}, nil
}

func (s *scripted) History(_ context.Context, req control.HistoryRequest) (control.History, error) {
	s.last = req
	if s.err != nil {
		return control.History{}, s.err
	}
	return control.History{Events: []control.Event{
		{At: t0, Type: "job.submitted", Message: "job wc submitted with 2 stages"},
		{At: t0, Type: "task.retried", Stage: "map", Task: fakeID + "/0/1", Partition: ptr(1), Attempt: 1, Message: "boom"},
	}, NextCursor: "abc"}, nil
}

func (s *scripted) Cancel(_ context.Context, owner, id string) (control.JobStatus, error) {
	s.last = [2]string{owner, id}
	if s.err != nil {
		return control.JobStatus{}, s.err
	}
	return fullStatus("CANCELLED"), nil
}

func (s *scripted) Outputs(_ context.Context, req control.OutputsRequest) (control.OutputList, error) {
	s.last = req
	if s.err != nil {
		return control.OutputList{}, s.err
	}
	return control.OutputList{Job: fakeID, State: "SUCCEEDED", Complete: true, Bucket: "b", Manifest: "m",
		Outputs:    []control.OutputInfo{{Output: domain.Output{Stage: "reduce", Partition: 0, Attempt: 1, Part: 0, Key: "k"}, URL: "https://b.s3.amazonaws.com/k?X-Amz-Signature=x"}},
		URLExpires: ptr(t0), NextCursor: "abc"}, nil
}

// errInternal stands for an AWS failure deep in the control plane.
var errInternal = errors.New("operation error DynamoDB: GetItem, https response error StatusCode: 500, secret table arn:aws:dynamodb:us-east-1:1:table/x")

var (
	errNotFound     = domain.ErrNotFound
	errEnded        = &control.JobEndedError{ID: fakeID, State: sm.JobSucceeded}
	errIdemConflict = domain.ErrIdempotencyConflict
	errBadID        = &spec.FieldError{Field: "id", Message: "is not a job id"}
	errPresign      = control.ErrPresignUnavailable
)

func (s *scripted) CancelTask(_ context.Context, req control.CancelTaskRequest) (control.TaskCancellation, error) {
	s.last = req
	if s.err != nil {
		return control.TaskCancellation{}, s.err
	}
	return control.TaskCancellation{JobID: req.ID, Task: req.Task, Stage: "map", Partition: 3, State: sm.TaskFailed,
		Error: "task map/3 cancelled by " + req.Owner, Cancelled: t0, JobState: sm.JobFailed}, nil
}

// A task cancel's refusals, as operations.Operator.CancelTask gives them.
var (
	errBadTask        = &spec.FieldError{Field: "task", Message: `"map" is not STAGE/PARTITION (for example map/3)`}
	errNoTask         = &control.TaskNotFoundError{ID: fakeID, Task: "map/9", Why: `stage "map" has 4 tasks, numbered from 0`}
	errTaskEnded      = &control.TaskEndedError{ID: fakeID, Task: "map/3", State: sm.TaskSucceeded}
	errTaskNotStarted = &control.TaskNotStartedError{ID: fakeID, Task: "reduce/0", Why: `stage "reduce" has not started`}
)
