package control

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// The sweep's repairs, each driven by hand on the test clock.
func TestSweep(t *testing.T) {
	t.Parallel()
	runTaskCases(t, []taskCase{{
		name: "a claim past its lease and grace is expired and its message resent",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			first := r.claim(ref)
			r.queue.Drain()
			r.clock.Advance(2*unitLease - time.Millisecond)
			if c := r.sweep(); c.Expired != 0 {
				t.Fatalf("expired %d within the grace", c.Expired)
			}
			r.clock.Advance(time.Millisecond)
			if c := r.sweep(); c.Expired != 1 {
				t.Fatalf("sweep counts %+v, want one expired", c)
			}
			got := r.task(ref)
			if got.State != sm.TaskReady || got.Attempt != 1 || got.LastError != "lease expired" {
				t.Errorf("task %s attempt %d (%q), want READY", got.State, got.Attempt, got.LastError)
			}
			if due, want := r.store.DueOf(taskItem(ref)), r.clock.Now().Add(unitTimings.StuckAfter); !due.Equal(want) {
				t.Errorf("task due %v, want %v", due, want)
			}
			if diff := cmp.Diff([]testdouble.Sent{{URL: "q-normal", Body: ref.String()}}, r.queue.Drain()); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if end, ok := r.store.AttemptEnd(ref, 1); !ok || end.Kind != domain.AttemptLeaseExpired {
				t.Errorf("attempt 1 end %+v (%v), want lease_expired", end, ok)
			}
			if c := r.claim(ref); c.Task.Attempt != 2 {
				t.Errorf("claim after the expiry: attempt %d, want 2", c.Task.Attempt)
			}
			if err := r.svc.Heartbeat(r.ctx, first); !errors.Is(err, domain.ErrStaleClaim) {
				t.Errorf("heartbeat of the expired claim: %v, want ErrStaleClaim", err)
			}
		},
	}, {
		name: "an expired last attempt is exhausted and fails the job",
		spec: oneStage(1, 1, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			r.claim(ref)
			r.clock.Advance(2 * unitLease)
			if c := r.sweep(); c.Exhausted != 1 {
				t.Fatalf("sweep counts %+v, want one exhausted", c)
			}
			r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
			if reason := r.job(job).Error; !strings.Contains(reason, "lease expired on attempt 1 of 1") || !strings.Contains(reason, `stage "s" task 0`) {
				t.Errorf("job error %q", reason)
			}
			// Ending the job took everything out of the index.
			if c := r.sweep(); c.Examined != 0 {
				t.Errorf("a later sweep examined %d records, want none", c.Examined)
			}
		},
	}, {
		name: "a READY task whose message was lost is resent after StuckAfter, then less and less often",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref0, ref1 := taskRef(job, 0, 0), taskRef(job, 0, 1)
			r.queue.Drain() // lost
			r.clock.Advance(unitTimings.StuckAfter - time.Millisecond)
			if c := r.sweep(); c.Requeued != 0 {
				t.Fatalf("requeued %d before StuckAfter", c.Requeued)
			}
			r.clock.Advance(time.Millisecond)
			if c := r.sweep(); c.Requeued != 2 {
				t.Fatalf("sweep counts %+v, want two requeued", c)
			}
			want := map[string]int{ref0.String(): 1, ref1.String(): 1}
			if diff := cmp.Diff(want, bodyCounts(r.queue.Drain())); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if due, want := r.store.DueOf(taskItem(ref0)), r.clock.Now().Add(unitTimings.StuckAfter); !due.Equal(want) {
				t.Errorf("task due %v, want %v", due, want)
			}
			if c := r.sweep(); c.Requeued != 0 {
				t.Errorf("resent again at once: %+v", c)
			}
			// A task that keeps waiting is more likely behind a backlog:
			// the next look waits as long as it has waited.
			r.clock.Advance(unitTimings.StuckAfter)
			if c := r.sweep(); c.Requeued != 2 {
				t.Fatalf("second resend: %+v", c)
			}
			if due, want := r.store.DueOf(taskItem(ref0)), r.clock.Now().Add(2*unitTimings.StuckAfter); !due.Equal(want) {
				t.Errorf("task due %v, want %v", due, want)
			}
			if c := r.claim(ref0); c.Task.Attempt != 1 {
				t.Errorf("claim of the resent task: attempt %d", c.Task.Attempt)
			}
		},
	}, {
		name: "a stage whose completer died is completed by the sweep and leaves the index",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c := r.claim(taskRef(job, 0, 0))
			r.output(c, 1)
			r.store.SetFaults(nil, testdouble.FailOnce("TaskCommit"))
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, testdouble.ErrInjected) {
				t.Fatalf("commit: %v", err)
			}
			r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageRunning, sm.JobRunning)
			r.clock.Advance(unitTimings.CheckEvery)
			r.sweep()
			r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
			if due := r.store.DueOf(stageItem(job, 0)); !due.IsZero() {
				t.Errorf("completed stage put back in the sweep index at %v", due)
			}
			if n := r.sweep().Examined; n != 0 {
				t.Errorf("a later sweep examined %d records, want none", n)
			}
		},
	}, {
		// A marker's look can write a task record while its job is being
		// deleted; the deletion passed it by, and the record must not fail
		// every later sweep run.
		name: "a task record of a deleted job leaves the index without an error",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			r.queue.Drain()
			r.store.LoseJob(job, 0) // and everything but the task
			r.clock.Advance(unitTimings.StuckAfter)
			r.sweep()
			if due := r.store.DueOf(taskItem(ref)); !due.IsZero() {
				t.Errorf("task still due at %v", due)
			}
			if msgs := r.queue.Drain(); len(msgs) != 0 {
				t.Errorf("sent %v for a deleted job", msgs)
			}
			// The record itself stays, unindexed (README, Status); the
			// invariants at cleanup are about jobs that exist.
			r.store.LoseTask(ref)
		},
	}, {
		name: "a running stage that is not complete is checked again later",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			r.commit(r.claim(taskRef(job, 0, 0)), 1)
			r.clock.Advance(unitTimings.CheckEvery)
			r.sweep()
			if due, want := r.store.DueOf(stageItem(job, 0)), r.clock.Now().Add(unitTimings.CheckEvery); !due.Equal(want) {
				t.Errorf("stage due %v, want %v", due, want)
			}
			r.wantState(taskRef(job, 0, 1), sm.TaskReady, sm.StageRunning, sm.JobRunning)
		},
	}, {
		name: "a completed stage's follow-up is finished by the sweep",
		spec: twoStages(1, 3),
		run: func(t *testing.T, r *unitRig, job string) {
			c := r.claim(taskRef(job, 0, 0))
			r.output(c, 1)
			// The completer dies right after the complete transition.
			r.store.SetFaults(nil, testdouble.FailOnce("StageTransition"))
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, testdouble.ErrInjected) {
				t.Fatalf("commit: %v", err)
			}
			if s, down := r.stage(job, 0), r.stage(job, 1); s.State != sm.StageCompleted || down.State != sm.StageBlocked {
				t.Fatalf("stages %s, %s; want COMPLETED, BLOCKED", s.State, down.State)
			}
			r.queue.Drain()
			r.clock.Advance(unitTimings.StartGrace)
			if n := r.sweep().StagesFixed; n != 1 {
				t.Errorf("stages fixed %d, want 1", n)
			}
			if down := r.stage(job, 1); down.State != sm.StageRunning || !down.Materialized {
				t.Fatalf("downstream %+v, want started and materialized", down)
			}
			if diff := cmp.Diff([]testdouble.Sent{{URL: "q-normal", Body: taskRef(job, 1, 0).String()}}, r.queue.Drain()); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			if due := r.store.DueOf(stageItem(job, 0)); !due.IsZero() {
				t.Errorf("completed stage still in the sweep index at %v", due)
			}
			r.commit(r.claim(taskRef(job, 1, 0)), 1)
			r.wantState(taskRef(job, 1, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		},
	}, {
		name: "a FAILED task's failure reaches the job",
		spec: oneStage(1, 1, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			r.store.SetFaults(nil, testdouble.FailOnce("TaskRelease"))
			if _, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "boom"}); !errors.Is(err, testdouble.ErrInjected) {
				t.Fatalf("fail: %v", err)
			}
			r.wantState(ref, sm.TaskFailed, sm.StageRunning, sm.JobRunning)
			if c := r.sweep(); c.Failures != 1 {
				t.Fatalf("sweep counts %+v, want one failure propagated", c)
			}
			r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
			if reason := r.job(job).Error; reason != `stage "s" task 0 failed after 1 attempts: boom` {
				t.Errorf("job error %q", reason)
			}
			if c := r.sweep(); c.Examined != 0 {
				t.Errorf("a later sweep examined %d records, want none", c.Examined)
			}
		},
	}, {
		name: "the tasks and stages of an ended job are cancelled",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c0 := r.claim(taskRef(job, 0, 0))
			if err := r.store.EndJob(r.ctx, job, sm.JobCancel, "cancelled", "", r.clock.Now()); err != nil {
				t.Fatal(err)
			}
			r.clock.Advance(unitTimings.StuckAfter)
			if c := r.sweep(); c.Cancelled != 2 {
				t.Errorf("sweep counts %+v, want two cancelled", c)
			}
			for p := range 2 {
				r.wantState(taskRef(job, 0, p), sm.TaskCancelled, sm.StageCancelled, sm.JobCancelled)
			}
			if err := r.svc.Heartbeat(r.ctx, c0); !errors.Is(err, domain.ErrStaleClaim) {
				t.Errorf("heartbeat of a cancelled task: %v, want ErrStaleClaim", err)
			}
			if c := r.sweep(); c.Examined != 0 {
				t.Errorf("a later sweep examined %d records, want none", c.Examined)
			}
		},
	}, {
		name: "a root stage whose start was lost is started by the sweep",
		spec: oneStage(2, 3, ""),
		setup: func(r *unitRig) {
			r.store.SetFaults(testdouble.FailOnceWith("StageTransition", dynamo.ErrContention), nil)
		},
		run: func(t *testing.T, r *unitRig, job string) {
			// The submit recorded the job; its start failed and was logged.
			if st := r.stage(job, 0); st.State != sm.StageBlocked {
				t.Fatalf("stage %s after a failed start, want BLOCKED", st.State)
			}
			r.clock.Advance(unitTimings.StartGrace - time.Millisecond)
			if n := r.sweep().StagesFixed; n != 0 {
				t.Fatalf("started within the grace (%d)", n)
			}
			r.clock.Advance(time.Millisecond)
			if n := r.sweep().StagesFixed; n != 1 {
				t.Errorf("stages fixed %d, want 1", n)
			}
			if st := r.stage(job, 0); st.State != sm.StageRunning || !st.Materialized {
				t.Fatalf("stage %+v, want started and materialized", st)
			}
			if counts := bodyCounts(r.queue.Drain()); len(counts) != 2 {
				t.Errorf("messages %v, want one per task", counts)
			}
		},
	}, {
		name: "a job past its deadline fails, and its tasks are cancelled",
		spec: oneStage(1, 3, `,"deadline":"1m"`),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			c := r.claim(ref)
			r.clock.Advance(time.Minute - time.Millisecond)
			if err := r.svc.Heartbeat(r.ctx, c); err != nil {
				t.Fatalf("heartbeat before the deadline: %v", err)
			}
			if n := r.sweep().Deadlines; n != 0 {
				t.Fatalf("%d deadlines before the deadline", n)
			}
			r.clock.Advance(time.Millisecond)
			if n := r.sweep().Deadlines; n != 1 {
				t.Fatalf("%d deadlines, want 1", n)
			}
			r.wantState(ref, sm.TaskClaimed, sm.StageCancelled, sm.JobFailed)
			if j := r.job(job); j.Error != DeadlineReason {
				t.Errorf("job error %q, want %q", j.Error, DeadlineReason)
			}
			if err := r.svc.Heartbeat(r.ctx, c); !errors.Is(err, domain.ErrJobNotRunning) {
				t.Errorf("heartbeat after the deadline: %v, want ErrJobNotRunning", err)
			}
			// The running task is cancelled when the sweep next looks at it.
			r.clock.Advance(2 * unitLease)
			if n := r.sweep().Cancelled; n != 1 {
				t.Errorf("cancelled %d, want 1", n)
			}
			r.wantState(ref, sm.TaskCancelled, sm.StageCancelled, sm.JobFailed)
		},
	}, {
		name: "dead letters of live tasks go back to their queue; the rest are dropped or kept",
		spec: oneStage(2, 3, ""),
		opts: []func(*Config){func(c *Config) { c.Queues.DLQ = "q-dlq" }},
		run: func(t *testing.T, r *unitRig, job string) {
			live, done := taskRef(job, 0, 0), taskRef(job, 0, 1)
			r.commit(r.claim(done), 0)
			r.queue.Drain()
			r.queue.Push("q-dlq",
				queue.Message{ID: "m1", Receipt: "r1", Body: live.String()},
				queue.Message{ID: "m2", Receipt: "r2", Body: done.String()},
				queue.Message{ID: "m3", Receipt: "r3", Body: "not a task"})
			if c := r.sweep(); c.DeadLettered != 2 {
				t.Errorf("sweep counts %+v, want two dead letters handled", c)
			}
			if diff := cmp.Diff([]testdouble.Sent{{URL: "q-normal", Body: live.String()}}, r.queue.Drain()); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			// The one naming no task stays for an operator.
			if diff := cmp.Diff([]string{"r1", "r2"}, r.queue.Deleted()); diff != "" {
				t.Errorf("deleted receipts (-want +got):\n%s", diff)
			}
		},
	}})
}

// The sweep and a slow completer both find a stage's counters at zero; the
// completer wins the transition and its follow-up takes the stage out of
// the index. The sweep's completion then finds the stage no longer
// RUNNING; sweepStage's own comment says a completed stage must not be put
// back in the index to be done again.
func TestSweepLosingCompletionRace(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	job := r.submit(oneStage(1, 3, ""))
	c := r.claim(taskRef(job, 0, 0))
	r.output(c, 1)
	r.store.SetFaults(nil, testdouble.FailOnce("TaskCommit"))
	if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, testdouble.ErrInjected) {
		t.Fatalf("commit: %v", err)
	}
	// Just before the sweep's complete transition, the committer's retry
	// completes the stage (and finishes the job).
	var raced atomic.Bool
	r.store.SetFaults(func(m string) error {
		if m == "StageTransition" && raced.CompareAndSwap(false, true) {
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); err != nil {
				t.Errorf("the racing commit: %v", err)
			}
		}
		return nil
	}, nil)
	r.clock.Advance(unitTimings.CheckEvery)
	r.sweep()
	if !raced.Load() {
		t.Fatal("the sweep never tried to complete the stage")
	}
	r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
	if due := r.store.DueOf(stageItem(job, 0)); !due.IsZero() {
		t.Errorf("the sweep put the completed stage back in the index at %v", due)
	}
}
