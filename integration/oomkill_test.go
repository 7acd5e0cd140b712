package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An executor killed for memory before its watchdog fires (a Lambda
// runtime exit, a Fargate container's OOM kill) records nothing as it
// dies. Its liveness record does: the memory it reported with its last
// beat, or ECS's mark. These tests drive the control plane as executors
// would (claims with an executor id, beats with a memory report) and let
// the executor die by never beating again; the fake clock moves time on.

// oomRig is a sweep rig whose installation deploys 1GiB and 2GiB
// executors.
func oomRig(t *testing.T) *sweepRig {
	cfg := testTimings
	cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30}
	return newSweepRig(t, cfg)
}

// oomSpec is a one-task job of the rig's "work" task at memory, with
// retries up to maxMemory.
func oomSpec(name, memory, maxMemory string, attempts int) string {
	return fmt.Sprintf(`{"name":%q,"lease":"60s","retry":{"maxAttempts":%d,"backoff":"1ms"},"stages":[{"name":"s","task":"work",`+
		`"resources":{"memory":%q,"maxMemory":%q},"partitions":{"count":1}}]}`, name, attempts, memory, maxMemory)
}

// dieHolding has executor id beat once with report (zero: a plain beat),
// claim ref's task, and never beat again.
func dieHolding(t *testing.T, rig *sweepRig, id string, report control.MemoryReport, ref domain.TaskRef) control.Claim {
	t.Helper()
	ctx := context.Background()
	if err := rig.svc.ExecutorAliveMemory(ctx, id, report); err != nil {
		t.Fatal(err)
	}
	c, err := rig.svc.Claim(control.WithExecutor(ctx, id), ref)
	if err != nil {
		t.Fatalf("claim by %s: %v", id, err)
	}
	return c
}

func getTask(t *testing.T, rig *sweepRig, ref domain.TaskRef) domain.Task {
	t.Helper()
	task, err := rig.e.r.Store.TaskGet(context.Background(), ref)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// hasEvent reports whether job id's history has an event of type typ for
// attempt whose message contains msg.
func hasEvent(t *testing.T, rig *sweepRig, id, typ string, attempt int, msg string) bool {
	t.Helper()
	for _, ev := range historyOf(t, rig.e, id) {
		if ev.Type == typ && ev.Attempt == attempt && strings.Contains(ev.Message, msg) {
			return true
		}
	}
	return false
}

// The next claim after the holder's death (a takeover, while the dead
// attempt's lease still runs): a holder that last reported its memory at
// or above control.MemoryLostShare, or that ECS marked stopped for
// memory, ends its attempt as out of memory, and the task goes back to
// READY one size up; any other holder is taken over on the same size, as
// an ordinary lost executor.
func TestExecutorKilledForMemoryRetriesOnTheNextSize(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:ecs:eu-west-1:123456789012:task/bw-cluster/"
	tests := []struct {
		name     string
		executor string
		report   control.MemoryReport
		ecsKill  bool // ECS's stopped-for-memory event arrives
		memory   string
		max      string
		// want: out of memory (READY at wantMem, the claim dropped) or a
		// takeover on the same size.
		oom     bool
		wantMem spec.Size
		wantErr string
	}{
		{name: "high memory reported", executor: "0000000000000a01", report: control.MemoryReport{Used: 950 << 20, Limit: 1 << 30},
			memory: "1GiB", max: "2GiB", oom: true, wantMem: 2 << 30,
			wantErr: "out of memory at 1GiB; retrying at 2GiB: executor lost with its memory at 950 MiB of 1024 MiB"},
		{name: "at the mark", executor: "0000000000000a02", report: control.MemoryReport{Used: 943 << 20, Limit: 1 << 30},
			memory: "1GiB", max: "2GiB", oom: true, wantMem: 2 << 30, wantErr: "at 943 MiB of 1024 MiB"},
		{name: "at the Go soft limit", executor: "0000000000000a07", report: control.MemoryReport{Used: 930 << 20, Limit: 1 << 30},
			memory: "1GiB", max: "2GiB"},
		{name: "low memory reported", executor: "0000000000000a03", report: control.MemoryReport{Used: 300 << 20, Limit: 1 << 30},
			memory: "1GiB", max: "2GiB"},
		{name: "no report", executor: "0000000000000a04", memory: "1GiB", max: "2GiB"},
		{name: "Fargate task stopped for memory", executor: "ecs-9f8e7d6c5b4a", report: control.MemoryReport{Used: 300 << 20, Limit: 1 << 30},
			ecsKill: true, memory: "1GiB", max: "2GiB", oom: true, wantMem: 2 << 30,
			wantErr: "out of memory at 1GiB; retrying at 2GiB: executor killed for memory (executor: OutOfMemoryError: Container killed due to memory usage)"},
		{name: "at maxMemory", executor: "0000000000000a06", report: control.MemoryReport{Used: 2000 << 20, Limit: 2 << 30},
			memory: "2GiB", max: "2GiB", oom: true, wantMem: 2 << 30,
			wantErr: "out of memory at 2GiB, the stage's maxMemory; retrying at 2GiB"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := oomRig(t)
			ctx := context.Background()
			id := submitTo(t, rig.svc, "oom", oomSpec("oom", tc.memory, tc.max, 3))
			ref := domain.TaskRef{Job: id}
			first := dieHolding(t, rig, tc.executor, tc.report, ref)
			if tc.ecsKill {
				ev := fmt.Sprintf(`{"source":"aws.ecs","detail-type":"ECS Task State Change","detail":{"taskArn":%q,"lastStatus":"STOPPED",`+
					`"stoppedReason":"Essential container in task exited","containers":[{"name":"executor","reason":"OutOfMemoryError: Container killed due to memory usage"}]}}`,
					arn+strings.TrimPrefix(tc.executor, "ecs-"))
				parsed, ok := control.ParseECSTaskStateChange([]byte(ev))
				if !ok {
					t.Fatal("the ECS event is not recognised")
				}
				if marked, err := rig.svc.ECSTaskStopped(ctx, parsed); err != nil || !marked {
					t.Fatalf("ECS event: marked %v, %v", marked, err)
				}
			}
			// The holder's promise lapses; its lease has most of a minute.
			rig.clk.Advance(tuning.ExecutorLease + sm.LeaseSkew)
			second, err := rig.svc.Claim(control.WithExecutor(ctx, "0ther00000000000"), ref)
			task := getTask(t, rig, ref)
			if !tc.oom {
				if err != nil || second.Task.Attempt != 2 || task.Memory > 1<<30 || task.ErrorClass == domain.ClassOutOfMemory {
					t.Fatalf("claim after the death: attempt %d, %v; task memory %d class %q; want a takeover on the same size",
						second.Task.Attempt, err, task.Memory, task.ErrorClass)
				}
				if !hasEvent(t, rig, id, control.EventTaskLeaseExpire, 1, "") {
					t.Fatalf("history %+v: want attempt 1 lease_expired", historyOf(t, rig.e, id))
				}
				return
			}
			if !errors.Is(err, domain.ErrAlreadyDone) {
				t.Fatalf("claim after the death: %+v, %v; want the claim dropped (the task retries on a larger executor)", second, err)
			}
			if task.State != sm.TaskReady || task.Attempt != 1 || task.ErrorClass != domain.ClassOutOfMemory || task.Memory != tc.wantMem ||
				!strings.Contains(task.LastError, tc.wantErr) {
				t.Fatalf("task: %s attempt %d class %q memory %d error %q; want READY attempt 1, out_of_memory at %d, %q",
					task.State, task.Attempt, task.ErrorClass, task.Memory, task.LastError, tc.wantMem, tc.wantErr)
			}
			if !hasEvent(t, rig, id, "task.out_of_memory", 1, tc.wantErr) {
				t.Fatalf("history %+v: want attempt 1 out_of_memory saying %q", historyOf(t, rig.e, id), tc.wantErr)
			}
			// The dead executor's late commit is fenced.
			if err := rig.svc.Commit(ctx, first, control.CommitResult{Outputs: 0}); !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, domain.ErrAlreadyDone) {
				t.Fatalf("the dead executor's commit: %v, want it fenced", err)
			}
			// The next claim (an executor of the raised size) runs attempt 2.
			if got, err := rig.svc.TaskMemory(ctx, ref); err != nil || got != tc.wantMem {
				t.Fatalf("TaskMemory %d, %v; want %d", got, err, tc.wantMem)
			}
			rig.clk.Advance(time.Second)
			third, err := rig.svc.Claim(control.WithExecutor(ctx, "b1g0000000000000"), ref)
			if err != nil || third.Task.Attempt != 2 {
				t.Fatalf("claim of the retry: attempt %d, %v; want attempt 2", third.Task.Attempt, err)
			}
		})
	}
}

// Without a takeover (no executor claimed the message before the lease
// ran out), the sweep's expiry of the lease judges the holder the same
// way; on the last attempt the task fails saying it ran out of memory.
func TestSweepExpiryOfExecutorKilledForMemory(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		attempts int
		used     uint64
		// want
		state   sm.TaskState
		class   domain.ErrorClass
		mem     spec.Size
		wantErr string
		event   string
	}{
		{"high memory", 3, 1000 << 20, sm.TaskReady, domain.ClassOutOfMemory, 2 << 30,
			"out of memory at 1GiB; retrying at 2GiB: executor lost with its memory at 1000 MiB of 1024 MiB", "task.out_of_memory"},
		{"low memory", 3, 100 << 20, sm.TaskReady, "", 0, "lease expired", control.EventTaskLeaseExpire},
		{"high memory, last attempt", 1, 1000 << 20, sm.TaskFailed, domain.ClassOutOfMemory, 0,
			"ran out of memory at 1GiB on attempt 1 of 1: executor lost with its memory at 1000 MiB of 1024 MiB", "task.out_of_memory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := oomRig(t)
			ctx := context.Background()
			id := submitTo(t, rig.svc, "oomsweep", oomSpec("oomsweep", "1GiB", "2GiB", tc.attempts))
			ref := domain.TaskRef{Job: id}
			dieHolding(t, rig, "5eeb000000000001", control.MemoryReport{Used: tc.used, Limit: 1 << 30}, ref)
			// Past the lease and its grace: the sweep's expiry.
			rig.clk.Advance(3 * time.Minute)
			var task domain.Task
			waitFor(t, 30*time.Second, "the sweep to expire the lease", func() bool {
				if _, err := rig.svc.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
				task = getTask(t, rig, ref)
				return task.State != sm.TaskClaimed
			})
			if task.State != tc.state || task.ErrorClass != tc.class || task.Memory != tc.mem || !strings.Contains(task.LastError, tc.wantErr) {
				t.Fatalf("task: %s class %q memory %d error %q; want %s class %q memory %d error %q",
					task.State, task.ErrorClass, task.Memory, task.LastError, tc.state, tc.class, tc.mem, tc.wantErr)
			}
			if !hasEvent(t, rig, id, tc.event, 1, tc.wantErr) {
				t.Fatalf("history %+v: want attempt 1 %s saying %q", historyOf(t, rig.e, id), tc.event, tc.wantErr)
			}
			if tc.state == sm.TaskFailed {
				st, err := rig.svc.Status(ctx, "tester", id)
				if err != nil {
					t.Fatal(err)
				}
				if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "ran out of memory at 1GiB") {
					t.Fatalf("job %s %q; want FAILED saying it ran out of memory", st.State, st.Error)
				}
			}
		})
	}
}

// A message that comes back only after the dead claim's lease ran out
// (no executor took it over, the sweep has not looked yet) would be
// reclaimed at once on the same size. An executor of a known size asks
// for the task's size first (TaskMemory): that look puts the task back
// one size up when its holder was killed for memory, so the executor
// hands the message on instead of claiming it; after any other death the
// size stays and the reclaim goes ahead.
func TestLapsedClaimOfExecutorKilledForMemoryIsRaisedBeforeItsReclaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		used uint64
		want spec.Size
	}{{"high memory", 1000 << 20, 2 << 30}, {"low memory", 100 << 20, 1 << 30}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := oomRig(t)
			ctx := context.Background()
			id := submitTo(t, rig.svc, "oomlapsed", oomSpec("oomlapsed", "1GiB", "2GiB", 3))
			ref := domain.TaskRef{Job: id}
			dieHolding(t, rig, "1a95ed0000000001", control.MemoryReport{Used: tc.used, Limit: 1 << 30}, ref)
			rig.clk.Advance(61 * time.Second) // past the 60 s lease, within its grace: no sweep yet
			got, err := rig.svc.TaskMemory(ctx, ref)
			if err != nil || got != tc.want {
				t.Fatalf("TaskMemory %d, %v; want %d", got, err, tc.want)
			}
			task := getTask(t, rig, ref)
			if tc.want == 1<<30 {
				if task.State != sm.TaskClaimed {
					t.Fatalf("task %s, want it left CLAIMED for the reclaim", task.State)
				}
				c, err := rig.svc.Claim(control.WithExecutor(ctx, "0ther00000000000"), ref)
				if err != nil || c.Task.Attempt != 2 {
					t.Fatalf("reclaim: attempt %d, %v", c.Task.Attempt, err)
				}
				return
			}
			const want = "out of memory at 1GiB; retrying at 2GiB: executor lost with its memory at 1000 MiB of 1024 MiB"
			if task.State != sm.TaskReady || task.ErrorClass != domain.ClassOutOfMemory || task.Memory != 2<<30 || task.LastError != want {
				t.Fatalf("task %s class %q memory %d error %q; want READY at 2GiB, %q", task.State, task.ErrorClass, task.Memory, task.LastError, want)
			}
			if !hasEvent(t, rig, id, "task.out_of_memory", 1, want) {
				t.Fatalf("history %+v: want attempt 1 out_of_memory", historyOf(t, rig.e, id))
			}
		})
	}
}

// End to end on real executors: an executor of 1GiB reports its memory
// near its limit with its beat, claims the task and dies (no more beats,
// the task never failed). Executors of 1GiB and 2GiB poll the queues: the
// task is not taken over on 1GiB but retried on the 2GiB executor, where
// it commits; its attempts say out_of_memory, committed at 2GiB.
func TestDeadExecutorsHighMemoryTaskCommitsOnTheNextSize(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, tk *batchwork.Task) error {
		_, err := tk.Out.Write([]byte("ok\n"))
		return err
	})
	cfg := testTimings
	cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30}
	e := newEnv(t, reg, envOptions{noRun: true, control: &cfg})
	ctx := context.Background()
	id := e.submit("oome2e", []byte(oomSpec("oome2e", "1GiB", "2GiB", 3)))
	ref := domain.TaskRef{Job: id}

	const dead = "dead0000000000a1"
	if err := e.r.Service.ExecutorAliveMemory(ctx, dead, control.MemoryReport{Used: 1000 << 20, Limit: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Normal, 1, 2*time.Second, tuning.HeldVisibility)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	first, err := e.r.Service.Claim(control.WithExecutor(ctx, dead), ref)
	if err != nil {
		t.Fatal(err)
	}

	claims := make(chan control.Claim, 8)
	for _, size := range []spec.Size{1 << 30, 2 << 30} {
		p := e.r.Poller()
		p.Handler = &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: e.r.Executor.Log,
			Memory: size, OnClaim: func(c control.Claim, _ time.Time) { claims <- c }}
		runCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); _ = p.Run(runCtx) }()
		t.Cleanup(func() { stop(); <-done })
	}
	second := recvWithin(t, claims, time.Minute, "the retry's claim")
	if second.Task.Attempt != 2 || second.Task.Memory != 2<<30 {
		t.Fatalf("retry: attempt %d at memory %d, want attempt 2 at 2GiB", second.Task.Attempt, second.Task.Memory)
	}
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	tasks := tasksOf(t, e, id)
	if len(tasks) != 1 || strings.Join(outcomes(tasks[0]), ",") != "out_of_memory,committed" || tasks[0].Memory != "2GiB" {
		t.Fatalf("tasks %+v; want attempts out_of_memory, committed at 2GiB", tasks)
	}
	if err := e.r.Service.Commit(ctx, first, control.CommitResult{Outputs: 0}); !errors.Is(err, domain.ErrAlreadyDone) && !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("the dead executor's late commit: %v, want it fenced", err)
	}
}
