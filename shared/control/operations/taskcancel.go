package operations

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// CancelTaskRequest asks to cancel one task of a running job: Task is
// "STAGE/PARTITION", the stage by name (`map/3`).
type CancelTaskRequest struct {
	Owner, ID, Task string
}

// TaskCancellation is the answer of a task's cancel, the same for every
// repeat of it: the task, FAILED as cancelled (tolerated by its stage, or
// failing its job with Error), and its job's state when the cancel
// answered.
type TaskCancellation struct {
	JobID     string       `json:"jobId"`
	Task      string       `json:"task"`
	Stage     string       `json:"stage"`
	Partition int          `json:"partition"`
	State     sm.TaskState `json:"state"`
	// Tolerated: the stage's toleratedFailures allowance covered it, and
	// the job goes on without the partition.
	Tolerated bool      `json:"tolerated"`
	Error     string    `json:"error"`
	Cancelled time.Time `json:"cancelled"`
	// JobState is the job's state as the cancel left it: FAILED when the
	// task's failure failed it.
	JobState sm.JobState `json:"jobState"`
}

// TaskNotFoundError: the job has no such stage, or its stage no such
// partition (a 404 naming the task).
type TaskNotFoundError struct {
	ID, Task, Why string
}

func (e *TaskNotFoundError) Error() string {
	return fmt.Sprintf("job %s has no task %s: %s", e.ID, e.Task, e.Why)
}
func (e *TaskNotFoundError) Unwrap() error { return domain.ErrNotFound }

// TaskEndedError: the task finished before the cancel reached it (a 409):
// it committed, failed otherwise, or its job's end cancelled it.
type TaskEndedError struct {
	ID, Task string
	State    sm.TaskState
}

func (e *TaskEndedError) Error() string {
	if e.State == sm.TaskSucceeded {
		return fmt.Sprintf("task %s of job %s already finished: it committed (SUCCEEDED) before the cancel; its outputs stand", e.Task, e.ID)
	}
	return fmt.Sprintf("task %s of job %s already finished (%s); only a READY or running task can be cancelled", e.Task, e.ID, e.State)
}
func (e *TaskEndedError) Unwrap() error { return domain.ErrAlreadyDone }

// TaskNotStartedError: the task's stage has not made its tasks yet (a
// 409): it waits for its upstream stages, or is still starting.
type TaskNotStartedError struct {
	ID, Task, Why string
}

func (e *TaskNotStartedError) Error() string {
	return fmt.Sprintf("task %s of job %s cannot be cancelled yet: %s", e.Task, e.ID, e.Why)
}

// ParseTaskName splits "STAGE/PARTITION"; a *spec.FieldError naming
// field otherwise.
func ParseTaskName(field, name string) (stage string, partition int, err error) {
	i := strings.LastIndexByte(name, '/')
	if i <= 0 {
		return "", 0, &spec.FieldError{Field: field, Message: fmt.Sprintf("%q is not STAGE/PARTITION (for example map/3)", name)}
	}
	p, perr := strconv.Atoi(name[i+1:])
	if perr != nil || p < 0 || name[i+1:] != strconv.Itoa(p) {
		return "", 0, &spec.FieldError{Field: field, Message: fmt.Sprintf("%q: the partition must be a number from 0", name)}
	}
	return name[:i], p, nil
}

// CancelTask stops one task of its owner's running job: a waiting task
// (READY in its queue or its backoff) or a running one fails at once as
// cancelled, without retry (tasks.Lifecycle.CancelOne). Its stage then
// goes on as its toleratedFailures allow, or the job fails with an error
// naming the task. The running attempt is fenced by the write: it can no
// longer commit, and its executor stops the function at its next
// heartbeat; its message is dropped when it comes back, as a waiting
// task's is when it arrives.
//
// Idempotent: a cancelled task answers its cancel again, whatever its job
// did since. Refusals: *TaskNotFoundError (404), *TaskEndedError (409: it
// committed first, or ended otherwise), *TaskNotStartedError (409),
// *JobEndedError (409: the job is not RUNNING), a *spec.FieldError for a
// malformed task name (400), and domain.ErrNotFound for a job that is not
// the owner's.
func (s *Operator) CancelTask(ctx context.Context, req CancelTaskRequest) (TaskCancellation, error) {
	name, part, err := ParseTaskName("task", req.Task)
	if err != nil {
		return TaskCancellation{}, err
	}
	j, err := s.OwnedJob(ctx, req.Owner, req.ID)
	if err != nil {
		return TaskCancellation{}, err
	}
	idx := -1
	for i, st := range j.Spec.Stages {
		if st.Name == name {
			idx = i
		}
	}
	task := fmt.Sprintf("%s/%d", name, part)
	if idx < 0 {
		return TaskCancellation{}, &TaskNotFoundError{ID: j.ID, Task: task, Why: fmt.Sprintf("the job has no stage %q", name)}
	}
	ref := domain.TaskRef{Job: j.ID, Stage: idx, Partition: part}
	t, mayWrite, err := s.cancellable(ctx, j, ref, task)
	if err != nil {
		return TaskCancellation{}, err
	}
	switch {
	case t.State == sm.TaskFailed && t.ErrorClass == domain.ClassCancelled:
		if j.State == sm.JobRunning {
			// Finishes a follow-up an earlier cancel was interrupted in.
			t, err = s.tasks.CancelOne(ctx, tasks.CancelParams{Ref: ref, Spec: j.Spec, Owner: j.Owner, Reason: t.LastError, Before: t})
		}
	case sm.Tasks.IsTerminal(t.State):
		return TaskCancellation{}, &TaskEndedError{ID: j.ID, Task: task, State: t.State}
	case j.State != sm.JobRunning:
		return TaskCancellation{}, &JobEndedError{ID: j.ID, State: j.State}
	default:
		reason := fmt.Sprintf("task %s cancelled by %s", task, j.Owner)
		t, err = s.tasks.CancelOne(ctx, tasks.CancelParams{Ref: ref, Spec: j.Spec, Owner: j.Owner, Reason: reason, Before: t, MaxAttempts: mayWrite})
		if err == nil {
			s.log.Info("task cancelled", "job_id", j.ID, "task", task, "tolerated", t.Tolerated)
		}
	}
	cancelled := t.State == sm.TaskFailed && t.ErrorClass == domain.ClassCancelled
	if !cancelled && (errors.Is(err, domain.ErrAlreadyDone) || errors.Is(err, sm.ErrInvalidTransition)) {
		// It ended between the read and the write: a commit came first.
		return TaskCancellation{}, &TaskEndedError{ID: j.ID, Task: task, State: t.State}
	}
	if err != nil {
		// Written but not followed up (the job's failure, the stage's
		// check): the sweep finishes it, and so does the cancel again.
		return TaskCancellation{}, fmt.Errorf("cancel task %s of job %s: %w", task, j.ID, err)
	}
	state, err := s.store.JobState(ctx, j.ID)
	if err != nil {
		return TaskCancellation{}, err
	}
	return TaskCancellation{JobID: j.ID, Task: task, Stage: name, Partition: part, State: t.State, Tolerated: t.Tolerated,
		Error: t.LastError, Cancelled: t.Updated, JobState: state}, nil
}

// cancellable reads the task ref of job j: a started stage's task, or the
// error that says why there is none. mayWrite is the attempts to write a
// task of a stage whose tasks have no record until their first write
// (sm.TaskUnwritten), when ref is such a task.
func (s *Operator) cancellable(ctx context.Context, j domain.Job, ref domain.TaskRef, task string) (t domain.Task, mayWrite int, err error) {
	st, err := s.store.StageGet(ctx, j.ID, ref.Stage)
	if err != nil {
		return domain.Task{}, 0, err
	}
	made := st.Sent(ref.Partition)
	switch {
	case j.State == sm.JobWaiting:
		return domain.Task{}, 0, &TaskNotStartedError{ID: j.ID, Task: task, Why: fmt.Sprintf("the job is WAITING to start at %s; cancel the job instead",
			j.StartAt.UTC().Format(time.RFC3339))}
	case st.State == sm.StageBlocked && j.State == sm.JobRunning:
		return domain.Task{}, 0, &TaskNotStartedError{ID: j.ID, Task: task, Why: fmt.Sprintf("stage %q has not started", st.Name)}
	case st.State == sm.StageBlocked:
		return domain.Task{}, 0, &JobEndedError{ID: j.ID, State: j.State}
	case st.Materialized && ref.Partition >= st.Total:
		return domain.Task{}, 0, &TaskNotFoundError{ID: j.ID, Task: task, Why: fmt.Sprintf("stage %q has %d tasks, numbered from 0", st.Name, st.Total)}
	}
	t, err = s.store.TaskGet(ctx, ref)
	_, unwritten := stages.UnwrittenTotal(j.Spec, ref.Stage)
	switch {
	case errors.Is(err, domain.ErrNotFound) && unwritten && made:
		mx := j.Spec.StageRetry(ref.Stage).MaxAttempts
		return domain.Task{Ref: ref, State: sm.TaskUnwritten, MaxAttempts: mx}, mx, nil
	case errors.Is(err, domain.ErrNotFound) && !made && st.State == sm.StageRunning:
		return domain.Task{}, 0, &TaskNotStartedError{ID: j.ID, Task: task, Why: fmt.Sprintf("stage %q is still starting its tasks; try again shortly", st.Name)}
	case errors.Is(err, domain.ErrNotFound):
		return domain.Task{}, 0, &TaskNotFoundError{ID: j.ID, Task: task, Why: "it has no record"}
	}
	return t, 0, err
}
