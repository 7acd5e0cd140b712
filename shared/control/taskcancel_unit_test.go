package control

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An owner's cancel of a running task fails it as cancelled, fences its
// attempt (its heartbeat says it was cancelled, its commit is refused)
// and, with no allowance, fails the job naming the task; a second cancel
// answers the same.
func TestCancelTaskFailsTheJobNamingTheTask(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	id := r.submit(oneStage(2, 3, ""))
	c := r.claim(taskRef(id, 0, 0))
	got, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: id, Task: "s/0"})
	if err != nil {
		t.Fatal(err)
	}
	const reason = "task s/0 cancelled by tester"
	if got.State != sm.TaskFailed || got.Tolerated || got.Error != reason || got.JobState != sm.JobFailed {
		t.Fatalf("cancel: %+v; want FAILED, untolerated, %q, job FAILED", got, reason)
	}
	r.wantState(c.Task.Ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
	if j := r.job(id); !strings.Contains(j.Error, reason) {
		t.Errorf("job error %q does not name the cancelled task", j.Error)
	}
	if err := r.svc.Heartbeat(r.ctx, c); !errors.Is(err, domain.ErrTaskCancelled) || !errors.Is(err, domain.ErrStaleClaim) {
		t.Errorf("the cancelled attempt's heartbeat: %v; want ErrTaskCancelled with ErrStaleClaim", err)
	}
	r.output(c, 1)
	if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, domain.ErrAlreadyDone) {
		t.Errorf("the cancelled attempt's commit: %v; want it refused", err)
	}
	if tk := r.task(c.Task.Ref); tk.State != sm.TaskFailed || tk.ErrorClass != domain.ClassCancelled {
		t.Errorf("task after the late commit: %s %q", tk.State, tk.ErrorClass)
	}
	again, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: id, Task: "s/0"})
	if err != nil || !reflect.DeepEqual(again, got) {
		t.Fatalf("second cancel: %+v, %v; want the first's %+v", again, err, got)
	}
}

// A waiting task cancelled in a stage that tolerates a failure fails
// tolerated: its message is dropped, and the job succeeds without it.
func TestCancelWaitingTaskWithinAllowance(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	id := r.submit(`{"name":"unit","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":3},"toleratedFailures":{"count":1}}]}`)
	got, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: id, Task: "s/2"})
	if err != nil || got.State != sm.TaskFailed || !got.Tolerated || got.JobState != sm.JobRunning {
		t.Fatalf("cancel: %+v, %v; want FAILED, tolerated, job RUNNING", got, err)
	}
	if _, err := r.svc.Claim(r.ctx, taskRef(id, 0, 2)); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of the cancelled task: %v; want ErrAlreadyDone (message dropped)", err)
	}
	for p := range 2 {
		r.commit(r.claim(taskRef(id, 0, p)), 1)
	}
	r.wantState(taskRef(id, 0, 2), sm.TaskFailed, sm.StageCompleted, sm.JobSucceeded)
}

// What a cancel refuses, each with its own error.
func TestCancelTaskRefusals(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	id := r.submit(twoStages(2, 3))
	r.commit(r.claim(taskRef(id, 0, 1)), 1)
	notFound := func(err error) bool {
		var e *TaskNotFoundError
		return errors.As(err, &e) && errors.Is(err, domain.ErrNotFound)
	}
	badName := func(err error) bool { var e *spec.FieldError; return errors.As(err, &e) && e.Field == "task" }
	for _, c := range []struct {
		owner, task string
		want        func(error) bool
		says        string
	}{
		{"mallory", "s/0", func(err error) bool { return errors.Is(err, domain.ErrNotFound) }, "another owner's job"},
		{"tester", "s", badName, "no partition"},
		{"tester", "s/x", badName, "partition not a number"},
		{"tester", "s/-1", badName, "negative partition"},
		{"tester", "s/01", badName, "partition with a leading zero"},
		{"tester", "/0", badName, "no stage"},
		{"tester", "zz/0", notFound, "unknown stage"},
		{"tester", "s/2", notFound, "partition past the stage's tasks"},
		{"tester", "s/1", func(err error) bool {
			var e *TaskEndedError
			return errors.As(err, &e) && e.State == sm.TaskSucceeded && strings.Contains(err.Error(), "committed")
		}, "a committed task"},
		{"tester", "t/0", func(err error) bool { var e *TaskNotStartedError; return errors.As(err, &e) }, "a stage not started"},
	} {
		_, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: c.owner, ID: id, Task: c.task})
		if !c.want(err) {
			t.Errorf("%s (%s by %s): %v", c.says, c.task, c.owner, err)
		}
	}
	if err := r.svc.Operator.Cancel(r.ctx, "tester", id); err != nil {
		t.Fatal(err)
	}
	var ended *JobEndedError
	if _, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: id, Task: "s/0"}); !errors.As(err, &ended) {
		t.Errorf("task of a cancelled job: %v; want *JobEndedError", err)
	}
}

// A task backing off after a failed attempt is cancelled in its backoff:
// it never runs again, and the job fails naming it.
func TestCancelTaskInBackoff(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	id := r.submit(oneStage(1, 3, ""))
	c := r.claim(taskRef(id, 0, 0))
	if d, err := r.svc.Fail(r.ctx, c, FailParams{Cause: "boom"}); err != nil || !d.Retry {
		t.Fatalf("fail: %+v, %v; want a retry", d, err)
	}
	if _, err := r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: id, Task: "s/0"}); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Minute) // past the backoff
	if _, err := r.svc.Claim(r.ctx, c.Task.Ref); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim after the backoff: %v; want ErrAlreadyDone", err)
	}
	r.wantState(c.Task.Ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
}
