package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A job's deadline, on the injected clock: the sweep leaves the job alone
// until the deadline passes (it finds the job through the due index, no
// scan), then fails it with "deadline exceeded" once, even over repeated
// sweeps; its running tasks see their context cancelled at their next
// heartbeat, the next stage never starts, and the sweep cancels the tasks'
// records afterwards.
func TestJobDeadlineFailsJobAndCancelsTasks(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	// The lease outlasts the deadline: the injected clock jumps, and a
	// lease that lapsed in the jump would stop the tasks for another
	// reason (lease lost) than the one under test.
	type stopped struct {
		partition int
		cause     error
	}
	started, ended := make(chan int, 4), make(chan stopped, 4)
	rig.e.reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error {
		started <- tk.Partition
		select {
		case <-ctx.Done():
			ended <- stopped{tk.Partition, context.Cause(ctx)}
			return ctx.Err()
		case <-time.After(time.Minute):
			ended <- stopped{tk.Partition, nil}
			return errors.New("never cancelled")
		}
	})
	id := submitTo(t, rig.svc, "deadline", `{"name":"deadline","deadline":"30m","lease":"12h","stages":[
	  {"name":"s","task":"hang","partitions":{"count":2}},
	  {"name":"after","task":"work","after":["s"],"partitions":{"count":1}}]}`)

	msgs := receiveVisible(t, rig.e, rig.e.r.Resources.Queues.Normal)
	if len(msgs) != 2 {
		t.Fatalf("%d messages after submit, want 2", len(msgs))
	}
	exec := rig.executor(rig.svc)
	exec.HeartbeatEvery = 100 * time.Millisecond
	results := make(chan feed.Result, 2)
	for _, m := range msgs {
		go func() {
			results <- exec.Handle(context.Background(), feed.Delivery{Body: m.Body, SentAt: m.SentAt}, nil)
		}()
	}
	for range 2 {
		recvWithin(t, started, 30*time.Second, "a task to start")
	}

	// Before the deadline: nothing happens, however often the sweep runs.
	rig.clk.Advance(30*time.Minute - time.Second)
	if c := mustSweep(t, rig.svc); c.Deadlines != 0 {
		t.Fatalf("sweep before the deadline: %+v", c)
	}
	if js := jobState(t, rig.svc, id); js.State != string(sm.JobRunning) {
		t.Fatalf("job %s before its deadline", js.State)
	}

	rig.clk.Advance(2 * time.Second)
	if c := mustSweep(t, rig.svc); c.Deadlines != 1 {
		t.Fatalf("sweep after the deadline: %+v, want one deadline exceeded", c)
	}
	js := jobState(t, rig.svc, id)
	if js.State != string(sm.JobFailed) || js.Error != control.DeadlineReason {
		t.Fatalf("job %s (%q), want FAILED (%q)", js.State, js.Error, control.DeadlineReason)
	}
	for _, st := range js.Stages {
		if st.State != string(sm.StageCancelled) {
			t.Errorf("stage %s is %s, want CANCELLED", st.Name, st.State)
		}
	}
	if c := mustSweep(t, rig.svc); c.Deadlines != 0 {
		t.Errorf("a second sweep failed the job again: %+v", c)
	}

	// The running tasks are stopped by their heartbeat, as on a cancel:
	// their messages are deleted, not left to come back.
	for range 2 {
		s := recvWithin(t, ended, 30*time.Second, "a running task to be cancelled")
		if s.cause == nil || s.cause.Error() != "job no longer running" {
			t.Errorf("task %d ended with cause %v, want the job-stopped cancel", s.partition, s.cause)
		}
		r := recvWithin(t, results, 30*time.Second, "the handler to return")
		if r.Action != feed.Delete {
			t.Errorf("handler result %+v, want Delete", r)
		}
	}

	// Once their last lease would have lapsed, the sweep cancels the tasks.
	rig.clk.Advance(25 * time.Hour) // past the last heartbeat's lease and its grace
	mustSweep(t, rig.svc)
	for _, tk := range stageTasks(t, rig.e, id, 0) {
		if tk.State != sm.TaskCancelled {
			t.Errorf("task %s is %s, want CANCELLED", tk.Ref, tk.State)
		}
	}
	if n := rig.runCount(id + "/after/0"); n != 0 {
		t.Errorf("the next stage ran %d times", n)
	}
}

// recvWithin fails the test unless ch yields within d: a bound on a wait
// that a bug would make endless.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
	var zero T
	return zero
}
