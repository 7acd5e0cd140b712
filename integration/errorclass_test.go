package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// historyOf reads a job's whole timeline.
func historyOf(t *testing.T, e *env, id string) []control.Event {
	t.Helper()
	h, err := e.r.Service.History(context.Background(), control.HistoryRequest{Owner: "tester", ID: id, Limit: 200})
	if err != nil {
		t.Fatalf("history of %s: %v", id, err)
	}
	return h.Events
}

// tasksOf lists a job's tasks with their attempts.
func tasksOf(t *testing.T, e *env, id string) []control.TaskInfo {
	t.Helper()
	l, err := e.r.Service.ListTasks(context.Background(), control.ListTasksRequest{Owner: "tester", ID: id, Limit: 200})
	if err != nil {
		t.Fatalf("tasks of %s: %v", id, err)
	}
	return l.Tasks
}

func outcomes(ti control.TaskInfo) []string {
	var out []string
	for _, a := range ti.Attempts {
		out = append(out, a.Outcome)
	}
	return out
}

// A task function's permanent error (batchwork.Permanent) fails its task,
// stage and job on the attempt that returned it, with attempts left; the
// task's class, its history and the job's error say so. A plain error on
// the same attempt is retried.
func TestPermanentErrorFailsTaskAtOnce(t *testing.T) {
	t.Parallel()
	var calls sync.Map // task name -> *atomic.Int32
	count := func(name string) *atomic.Int32 {
		n, _ := calls.LoadOrStore(name, new(atomic.Int32))
		return n.(*atomic.Int32)
	}
	reg := batchwork.NewRegistry()
	reg.Register("bad", func(ctx context.Context, tk *batchwork.Task) error {
		count("bad").Add(1)
		return batchwork.Permanent(fmt.Errorf("record 7 is not JSON"))
	})
	reg.Register("flaky", func(ctx context.Context, tk *batchwork.Task) error {
		count("flaky").Add(1)
		if tk.Attempt == 1 {
			return errors.New("connection reset")
		}
		_, err := fmt.Fprintln(tk.Out, "ok")
		return err
	})
	e := newEnv(t, reg, envOptions{})
	spec := func(task string) []byte {
		return []byte(`{"name":"` + task + `","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","task":"` + task + `","partitions":{"count":1}}]}`)
	}
	bad, flaky := e.submit("bad", spec("bad")), e.submit("flaky", spec("flaky"))

	st := e.waitJob(bad, time.Minute)
	const wantErr = `stage "s" task 0 failed with a permanent error on attempt 1 of 3: record 7 is not JSON`
	if st.State != string(sm.JobFailed) || st.Error != wantErr {
		t.Fatalf("job %s: %s %q; want FAILED %q", bad, st.State, st.Error, wantErr)
	}
	if n := count("bad").Load(); n != 1 {
		t.Errorf("the permanent task ran %d times, want once", n)
	}
	tasks := tasksOf(t, e, bad)
	if len(tasks) != 1 || tasks[0].State != string(sm.TaskFailed) || tasks[0].Attempt != 1 ||
		tasks[0].ErrorClass != string(domain.ClassPermanent) || tasks[0].LastError != "record 7 is not JSON" ||
		strings.Join(outcomes(tasks[0]), ",") != "permanent" {
		t.Errorf("tasks %+v; want one FAILED on attempt 1 of class permanent, its attempt's outcome permanent", tasks)
	}
	var found bool
	for _, ev := range historyOf(t, e, bad) {
		if ev.Type == "task.permanent" && ev.Attempt == 1 && ev.Message == "record 7 is not JSON" {
			found = true
		}
		if ev.Type == "task.retried" {
			t.Errorf("history has a retry of a permanent error: %+v", ev)
		}
	}
	if !found {
		t.Errorf("history of %s has no task.permanent event: %+v", bad, historyOf(t, e, bad))
	}

	if st := e.waitJob(flaky, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %s %q; want SUCCEEDED after a retry", flaky, st.State, st.Error)
	}
	if n := count("flaky").Load(); n != 2 {
		t.Errorf("the flaky task ran %d times, want twice", n)
	}
	if tasks := tasksOf(t, e, flaky); len(tasks) != 1 || strings.Join(outcomes(tasks[0]), ",") != "retried,committed" {
		t.Errorf("flaky tasks %+v; want attempts retried, committed", tasks)
	}
}

// A hung task function (one that ignores its context) is timed out at its
// stage's timeout and abandoned after the grace; the attempt is failed and
// retried like any failure, its history says "timed out after 1s", and a
// late commit of the timed-out attempt is refused by the token fence.
func TestHungTaskTimesOutAndItsLateCommitIsFenced(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	var calls atomic.Int32
	reg := batchwork.NewRegistry()
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error {
		calls.Add(1)
		if tk.Attempt == 1 {
			<-release // hung: never looks at ctx
		}
		_, err := fmt.Fprintf(tk.Out, "attempt %d\n", tk.Attempt)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	var mu sync.Mutex
	var first control.Claim
	exec := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(),
		TimeoutGrace: 200 * time.Millisecond,
		OnClaim: func(c control.Claim, _ time.Time) {
			mu.Lock()
			defer mu.Unlock()
			if c.Task.Attempt == 1 {
				first = c
			}
		}}
	id := e.submit("hang", []byte(`{"name":"hang","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","task":"hang","timeout":"1s","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id}

	// Attempt 1 hangs: the runner gives up on it after the timeout and
	// the grace, and fails it for a retry.
	msgs := receiveVisible(t, e, e.r.Resources.Queues.Normal)
	if len(msgs) != 1 {
		t.Fatalf("%d messages, want 1", len(msgs))
	}
	url := e.r.Resources.Queues.Normal
	extend := func(ctx context.Context, d time.Duration) error {
		return e.r.Queue.ChangeVisibility(ctx, url, msgs[0].Receipt, d)
	}
	handled := make(chan feed.Result, 1)
	go func() {
		handled <- exec.Handle(ctx, feed.Delivery{Body: msgs[0].Body, SentAt: msgs[0].SentAt}, extend)
	}()
	var res feed.Result
	select {
	case res = <-handled:
	case <-time.After(15 * time.Second):
		t.Fatal("the hung attempt is still running 15s after its 1s timeout")
	}
	if res.Action != feed.Hide {
		t.Fatalf("hung attempt: result %+v; want hidden for a retry", res)
	}
	if err := extend(ctx, res.Delay); err != nil {
		t.Fatal(err)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskReady || task.Attempt != 1 || task.ErrorClass != domain.ClassTimedOut || !strings.HasPrefix(task.LastError, "timed out after 1s") {
		t.Fatalf("task after the timeout: %s attempt %d class %q error %q; want READY, timed_out, timed out after 1s", task.State, task.Attempt, task.ErrorClass, task.LastError)
	}

	// The timed-out attempt's late commit (had it gone on to write its
	// output and commit) is fenced.
	mu.Lock()
	stale := first
	mu.Unlock()
	putOutput(t, e, stale, "stale\n")
	if err := e.r.Service.Commit(ctx, stale, control.CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("late commit of the timed-out attempt: %v, want ErrStaleClaim", err)
	}

	// Attempt 2 runs and commits.
	waitFor(t, 30*time.Second, "the retry to commit", func() bool {
		work(t, e, exec)
		return jobState(t, e.r.Service, id).State != string(sm.JobRunning)
	})
	if st := jobState(t, e.r.Service, id); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %q, want SUCCEEDED", st.State, st.Error)
	}
	assertCommittedOnce(t, e, id, 0, 1, 2)
	if tasks := tasksOf(t, e, id); len(tasks) != 1 || strings.Join(outcomes(tasks[0]), ",") != "timed_out,committed" {
		t.Errorf("tasks %+v; want attempts timed_out, committed", tasks)
	}
	var found bool
	for _, ev := range historyOf(t, e, id) {
		if ev.Type == "task.timed_out" && ev.Attempt == 1 && strings.HasPrefix(ev.Message, "timed out after 1s") {
			found = true
		}
	}
	if !found {
		t.Errorf("history has no task.timed_out event for attempt 1: %+v", historyOf(t, e, id))
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("the function ran %d times, want 2", n)
	}
}
