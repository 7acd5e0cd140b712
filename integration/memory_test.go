package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An exec attempt killed by the kernel's out-of-memory killer (injected:
// the program SIGKILLs itself on attempt 1) is retried on the next
// executor size up: the 1GiB executor that ran it moves the retry's
// message to the 2GiB queue (sizedqueues_test.go), an executor of the
// wrong size that receives a message forwards it unclaimed, the 2GiB
// executor runs and commits it, and the task's history says "out of
// memory at 1GiB; retrying at 2GiB".
func TestOutOfMemoryRetriesOnTheNextSize(t *testing.T) {
	t.Parallel()
	prog := "#!/bin/sh\nif [ \"$BATCHWORK_ATTEMPT\" = 1 ]; then kill -9 $$; fi\necho \"ran attempt $BATCHWORK_ATTEMPT\"\n"
	e, runner, handle := newSizedExecRig(t, prog)
	ctx := context.Background()
	small, big := runner(1<<30, 0), runner(2<<30, 0)
	id := e.submit("oom", []byte(`{"name":"oom","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","exec":["prog"],`+
		`"resources":{"memory":"1GiB","maxMemory":"2GiB"},"partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id}
	normal, sized := e.r.Resources.Queues.Normal, e.r.Resources.Queues.Sized[2<<30]
	if sized == "" {
		t.Fatalf("no 2GiB ready queue: %+v", e.r.Resources.Queues)
	}

	// The big executor does not run a 1GiB task: it forwards its message
	// (to the same queue, the 1GiB one) unclaimed.
	if res := handle(big, normal); res.Action != feed.Delete || !strings.Contains(errString(res.Err), "another size") {
		t.Fatalf("2GiB executor on a 1GiB task: %+v, want it forwarded", res)
	}
	// Attempt 1 runs on the small executor and is OOM-killed; its retry's
	// message moves to the 2GiB queue.
	if res := handle(small, normal); res.Action != feed.Delete {
		t.Fatalf("attempt 1: %+v, want its message moved to the 2GiB queue", res)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	const note = "out of memory at 1GiB; retrying at 2GiB"
	if task.State != sm.TaskReady || task.Attempt != 1 || task.ErrorClass != domain.ClassOutOfMemory || task.Memory != 2<<30 || !strings.HasPrefix(task.LastError, note) {
		t.Fatalf("task after the OOM: %s attempt %d class %q memory %d error %q; want READY at 2GiB, %q", task.State, task.Attempt, task.ErrorClass, task.Memory, task.LastError, note)
	}
	// A 1GiB executor that receives the raised task anyway forwards it,
	// unclaimed.
	if res := handle(small, sized); res.Action != feed.Delete || !strings.Contains(errString(res.Err), "another size") {
		t.Fatalf("1GiB executor on the raised task: %+v, want it forwarded", res)
	}
	if task, _ := e.r.Store.TaskGet(ctx, ref); task.Attempt != 1 {
		t.Fatalf("the hand-back spent an attempt: attempt %d", task.Attempt)
	}
	// The big executor runs attempt 2, which commits.
	if res := handle(big, sized); res.Action != feed.Delete || res.Err != nil {
		t.Fatalf("attempt 2: %+v, want committed", res)
	}
	if st := e.waitJob(id, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %q, want SUCCEEDED", st.State, st.Error)
	}
	assertCommittedOnce(t, e, id, 0, 1, 2)
	tasks := tasksOf(t, e, id)
	if len(tasks) != 1 || strings.Join(outcomes(tasks[0]), ",") != "out_of_memory,committed" || tasks[0].Memory != "2GiB" {
		t.Errorf("tasks %+v; want attempts out_of_memory, committed at 2GiB", tasks)
	}
	var found bool
	for _, ev := range historyOf(t, e, id) {
		if ev.Type == "task.out_of_memory" && ev.Attempt == 1 && strings.HasPrefix(ev.Message, note) && strings.Contains(ev.Message, "signal: killed") {
			found = true
		}
	}
	if !found {
		t.Errorf("history has no task.out_of_memory event saying %q: %+v", note, historyOf(t, e, id))
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// Submit refuses a stage asking for an executor size the stack does not
// deploy, or whose out-of-memory retries would climb to one, with a 400
// naming the field; a schedule's spec is checked when it is created.
func TestSubmitRefusesUndeployedExecutorSizes(t *testing.T) {
	t.Parallel()
	cfg := testTimings
	cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30}
	reg := batchwork.NewRegistry()
	reg.Register("work", func(context.Context, *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, control: &cfg})
	stage := func(res string) []byte {
		return []byte(`{"name":"m","stages":[{"name":"ok","task":"work","partitions":{"count":1}},{"name":"s","task":"work","resources":` + res + `,"partitions":{"count":1}}]}`)
	}
	tests := []struct {
		res, field string
	}{
		{`{"memory":"4GiB"}`, "stages[1].resources.memory"},
		{`{"memory":"2GiB","maxMemory":"4GiB"}`, "stages[1].resources.maxMemory"},
		{`{"memory":"1GiB","maxMemory":"8GiB"}`, "stages[1].resources.maxMemory"},
	}
	for _, tt := range tests {
		r := e.call("alice", http.MethodPost, "/jobs", stage(tt.res), "Idempotency-Key", tt.res)
		if r.Status != http.StatusBadRequest {
			t.Fatalf("%s: status %d, want 400: %s", tt.res, r.Status, r.Body)
		}
		if ae := r.apiErr(t); ae.Field != tt.field || !strings.Contains(ae.Message, "1GiB, 2GiB") {
			t.Errorf("%s: error %+v, want one on %s listing the deployed sizes", tt.res, ae, tt.field)
		}
	}
	if r := e.call("alice", http.MethodPost, "/jobs", stage(`{"memory":"1GiB","maxMemory":"2GiB"}`), "Idempotency-Key", "ok"); r.Status != http.StatusCreated {
		t.Errorf("deployed sizes: status %d: %s", r.Status, r.Body)
	}
	body := []byte(`{"name": "hourly", "expression": "0 * * * *", "spec": ` + string(stage(`{"memory":"8GiB"}`)) + `}`)
	r := e.call("alice", http.MethodPost, "/schedules", body, "Idempotency-Key", "sched")
	if r.Status != http.StatusBadRequest {
		t.Fatalf("schedule: status %d, want 400: %s", r.Status, r.Body)
	}
	if ae := r.apiErr(t); ae.Field != "spec.stages[1].resources.memory" {
		t.Errorf("schedule: error %+v, want one on spec.stages[1].resources.memory", ae)
	}
}

// newSizedExecRig is an installation with executor sizes 1GiB and 2GiB and
// prog as the exec program "prog"; runner makes an executor of a size (its
// exec memory limit divided by divisor, 0 for none), and handle receives
// the task's message from a queue and handles it with an executor.
func newSizedExecRig(t *testing.T, prog string) (*env, func(size spec.Size, divisor int) *executor.Runner, func(r *executor.Runner, url string) feed.Result) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "prog"), []byte(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testTimings
	cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &cfg, execDir: dir})
	ctx := context.Background()
	if err := e.r.Service.PublishPrograms(ctx, []string{"prog"}); err != nil {
		t.Fatal(err)
	}
	runner := func(size spec.Size, divisor int) *executor.Runner {
		return &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(),
			ExecDir: dir, Memory: size, ExecMemoryDivisor: divisor}
	}
	handle := func(r *executor.Runner, url string) feed.Result {
		t.Helper()
		var msgs []queue.Message
		waitFor(t, 30*time.Second, "the task's message", func() bool {
			msgs = receiveVisible(t, e, url)
			return len(msgs) > 0
		})
		m := msgs[0]
		extend := func(ctx context.Context, d time.Duration) error {
			return e.r.Queue.ChangeVisibility(ctx, url, m.Receipt, d)
		}
		res := r.Handle(ctx, feed.Delivery{Body: m.Body, SentAt: m.SentAt}, extend)
		switch res.Action {
		case feed.Hide:
			if err := extend(ctx, 0); err != nil { // back at once: the test waits on state, not on delays
				t.Fatal(err)
			}
		case feed.Delete:
			if err := e.r.Queue.DeleteBatch(ctx, url, []string{m.Receipt}); err != nil {
				t.Fatal(err)
			}
		}
		return res
	}
	return e, runner, handle
}
