package integration

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// blockingTasks registers "block", whose partition 0 runs until its
// context is cancelled (reported on stopped with the cause it saw) and
// whose other partitions return at once, and says on started when
// partition 0 runs.
func blockingTasks() (reg *batchwork.Registry, started chan struct{}, stopped chan error) {
	reg = batchwork.NewRegistry()
	started, stopped = make(chan struct{}, 8), make(chan error, 8)
	reg.Register("block", func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Partition != 0 {
			return nil
		}
		started <- struct{}{}
		<-ctx.Done()
		stopped <- ctx.Err()
		return ctx.Err()
	})
	return reg, started, stopped
}

// runningClaim waits for partition 0 of stage 0 to run and returns its
// claim as the executor holds it (token, attempt, lease), read from the
// table.
func runningClaim(t *testing.T, e *env, id string, started chan struct{}) control.Claim {
	t.Helper()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("map/0 never started")
	}
	ctx := context.Background()
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	tk, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil || tk.State != sm.TaskClaimed {
		t.Fatalf("running task: %s, %v; want CLAIMED", tk.State, err)
	}
	j, err := e.r.Store.JobGet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return control.Claim{Task: tk, Spec: j.Spec, Lease: time.Duration(j.Spec.StageLease(0))}
}

// An owner's cancel of a running task on DynamoDB Local: the task
// function sees its context cancelled (its executor learnt it at a
// heartbeat), a commit with the attempt's claim is refused and changes
// nothing (the fence), the job fails naming the task, and a second
// cancel answers the same. Another owner gets a 404.
func TestTaskCancelStopsTheRunningAttempt(t *testing.T) {
	t.Parallel()
	reg, started, stopped := blockingTasks()
	e := newEnv(t, reg, envOptions{})
	id := e.submit("tc-run", []byte(`{"name":"tc-run","lease":"3s","stages":[{"name":"map","task":"block","partitions":{"count":2}}]}`))
	claim := runningClaim(t, e, id, started)

	e.callJSON("mallory", http.MethodPost, "/jobs/"+id+"/cancel?task=map/0", nil, http.StatusNotFound, nil)
	var first, again control.TaskCancellation
	e.callJSON("tester", http.MethodPost, "/jobs/"+id+"/cancel?task=map/0", nil, http.StatusOK, &first)
	const reason = "task map/0 cancelled by tester"
	if first.State != sm.TaskFailed || first.Tolerated || first.Error != reason || first.JobState != sm.JobFailed {
		t.Fatalf("cancel: %+v; want FAILED, untolerated, %q, job FAILED", first, reason)
	}
	select {
	case err := <-stopped:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the task function saw %v, want its context cancelled", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled attempt's function was not stopped")
	}

	// Fencing: the attempt's own claim can neither commit nor renew.
	ctx := context.Background()
	err := e.r.Service.Commit(ctx, claim, control.CommitResult{Outputs: 0, WrittenHere: true})
	if !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("commit with the cancelled attempt's claim: %v; want it refused", err)
	}
	if err := e.r.Service.Heartbeat(ctx, claim); !errors.Is(err, domain.ErrTaskCancelled) {
		t.Errorf("heartbeat with the cancelled attempt's claim: %v; want ErrTaskCancelled", err)
	}
	tk, err := e.r.Store.TaskGet(ctx, claim.Task.Ref)
	if err != nil || tk.State != sm.TaskFailed || tk.ErrorClass != domain.ClassCancelled || tk.CommittedAttempt != 0 {
		t.Fatalf("task after the stale commit: %s %q committed %d, %v; want FAILED, cancelled, never committed", tk.State, tk.ErrorClass, tk.CommittedAttempt, err)
	}

	st := e.waitJob(id, 30*time.Second)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, reason) {
		t.Fatalf("job %s %q; want FAILED naming the cancelled task", st.State, st.Error)
	}
	e.callJSON("tester", http.MethodPost, "/jobs/"+id+"/cancel?task=map/0", nil, http.StatusOK, &again)
	if !reflect.DeepEqual(again, first) {
		t.Errorf("second cancel: %+v; want the first's %+v", again, first)
	}
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/tasks?stage=map", nil, http.StatusOK, &tl)
	if a := tl.Tasks[0].Attempts; len(a) != 1 || a[0].Outcome != string(domain.AttemptCancelled) || tl.Tasks[0].ErrorClass != string(domain.ClassCancelled) {
		t.Errorf("map/0's history: %+v class %q; want one attempt, cancelled", a, tl.Tasks[0].ErrorClass)
	}
}

// A cancelled task within its stage's toleratedFailures: the stage
// completes without it and the job succeeds; a cancel of a task that
// committed first is a 409 saying so.
func TestTaskCancelWithinToleratedFailures(t *testing.T) {
	t.Parallel()
	reg, started, stopped := blockingTasks()
	e := newEnv(t, reg, envOptions{})
	id := e.submit("tc-tol", []byte(`{"name":"tc-tol","lease":"3s","stages":[{"name":"map","task":"block","partitions":{"count":3},"toleratedFailures":{"count":1}}]}`))
	runningClaim(t, e, id, started)
	ctx := context.Background()
	waitFor(t, 30*time.Second, "map/1 and map/2 to commit", func() bool {
		for p := 1; p < 3; p++ {
			tk, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
			if err != nil || tk.State != sm.TaskSucceeded {
				return false
			}
		}
		return true
	})
	res := e.call("tester", http.MethodPost, "/jobs/"+id+"/cancel?task=map/1", nil)
	if res.Status != http.StatusConflict || !strings.Contains(string(res.Body), "task_ended") || !strings.Contains(string(res.Body), "committed") {
		t.Fatalf("cancel of a committed task: %d %s; want 409 task_ended", res.Status, res.Body)
	}
	tc, err := e.r.Service.CancelTask(ctx, control.CancelTaskRequest{Owner: "tester", ID: id, Task: "map/0"})
	if err != nil || !tc.Tolerated {
		t.Fatalf("cancel: %+v, %v; want tolerated", tc, err)
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the cancelled attempt's function was not stopped")
	}
	st := e.waitJob(id, 30*time.Second)
	if st.State != string(sm.JobSucceeded) || st.FailedPartitions != 1 {
		t.Fatalf("job %s with %d failed partitions (%q); want SUCCEEDED without map/0", st.State, st.FailedPartitions, st.Error)
	}
}

// The cancel's write applied but its answer lost: the SDK's retry finds
// its condition false, and the cancel recognises its own write. One
// result, counted once: the job fails once, or the stage counts one
// tolerated failure. The task waits in its queue (no executor runs), so
// the cancel also writes a task that had no record yet.
func TestTaskCancelWithLostResponse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, extra string
		tolerated   bool
		job         sm.JobState
	}{
		{"job fails", "", false, sm.JobFailed},
		{"stage tolerates", `,"toleratedFailures":{"count":1}`, true, sm.JobRunning},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			inj := faults.New(1)
			e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
			id := e.submit("tc-lost", []byte(`{"name":"tc-lost","stages":[{"name":"map","task":"x","partitions":{"count":2}`+c.extra+`}]}`))
			inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Match: func(_ string, in any) bool {
				u, ok := in.(*dynamodb.TransactWriteItemsInput)
				if !ok || u.TransactItems[0].Update == nil || u.TransactItems[0].Update.UpdateExpression == nil {
					return false
				}
				return strings.Contains(*u.TransactItems[0].Update.UpdateExpression, "REMOVE tok, lease, nb")
			}})
			ctx := context.Background()
			req := control.CancelTaskRequest{Owner: "tester", ID: id, Task: "map/1"}
			got, err := e.r.Service.CancelTask(ctx, req)
			if inj.Total() != 1 {
				t.Fatalf("%d faults injected, want 1", inj.Total())
			}
			if err != nil || got.State != sm.TaskFailed || got.Tolerated != c.tolerated || got.JobState != c.job {
				t.Fatalf("cancel with a lost answer: %+v, %v; want FAILED, tolerated %v, job %s", got, err, c.tolerated, c.job)
			}
			again, err := e.r.Service.CancelTask(ctx, req)
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("the cancel again: %+v, %v; want %+v", again, err, got)
			}
			st, err := e.r.Store.StageGet(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if want := map[bool]int{true: 1}[c.tolerated]; st.Tolerated != want {
				t.Errorf("stage counts %d tolerated failures, want %d", st.Tolerated, want)
			}
			if c.tolerated {
				return
			}
			j, err := e.r.Store.JobGet(ctx, id)
			if err != nil || j.State != sm.JobFailed || j.Error != "task map/1 cancelled by tester" {
				t.Errorf("job %s %q, %v; want FAILED with the cancel's error", j.State, j.Error, err)
			}
		})
	}
}
