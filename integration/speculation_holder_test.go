package integration

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Review of issue 13 (speculation beside checkpoints and continuations).

// A holder whose task got a speculative copy is still the task's holder:
// its checkpoints are recorded (before the fix, the copy's claim had
// moved the record's attempt on, so the holder's checkpoint was refused
// as stale and the runner abandoned a healthy attempt). While the copy
// lives the holder cannot continue in a new invocation (that would put a
// task with a live copy back to READY); once the copy ended it can, as if
// it had never been copied.
func TestHolderCheckpointsAndContinuesBesideCopy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		copyFails bool
	}{
		{name: "copy live"},
		{name: "copy failed", copyFails: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newSpeculationRig(t, 4, 16)
			ctx := context.Background()
			r.straggle(t, 1)
			orig, cp := r.claims[3], r.claimCopy(t, 3)
			if tc.copyFails {
				if _, err := r.svc.Fail(ctx, cp, control.FailParams{Cause: "copy boom"}); err != nil {
					t.Fatalf("copy's failure: %v", err)
				}
			}
			if err := r.svc.Checkpoint(ctx, orig, 1, 100); err != nil {
				t.Fatalf("holder's checkpoint beside its task's copy: %v, want recorded", err)
			}
			task := r.task(t, 3)
			if task.Checkpoint.Attempt != orig.Task.Attempt || task.Checkpoint.Offset != 100 {
				t.Fatalf("task points at checkpoint %+v, want the holder's (attempt %d, offset 100)", task.Checkpoint, orig.Task.Attempt)
			}
			_, err := r.svc.Continue(ctx, orig, 100)
			if !tc.copyFails {
				if !errors.Is(err, sm.ErrInvalidTransition) {
					t.Fatalf("holder's continuation beside a live copy: %v, want refused (ErrInvalidTransition)", err)
				}
				if task := r.task(t, 3); task.State != sm.TaskClaimed || !task.Copy.Live() {
					t.Fatalf("task %s (copy live %v) after the refused continuation, want CLAIMED with its copy", task.State, task.Copy.Live())
				}
				return
			}
			if err != nil {
				t.Fatalf("holder's continuation after its copy failed: %v, want handed on", err)
			}
			task = r.task(t, 3)
			if task.State != sm.TaskReady || task.Copy.Live() {
				t.Fatalf("task %s (copy live %v) after the continuation, want READY", task.State, task.Copy.Live())
			}
			next := mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: 3})
			if next.Task.Attempt <= cp.Task.Attempt || next.Task.Checkpoint.Attempt != orig.Task.Attempt {
				t.Fatalf("next claim is attempt %d resuming from attempt %d's checkpoint; want past the copy's %d, from the holder's %d",
					next.Task.Attempt, next.Task.Checkpoint.Attempt, cp.Task.Attempt, orig.Task.Attempt)
			}
			r.commit(t, next)
			if st := jobState(t, r.svc, r.job); st.State != string(sm.JobSucceeded) {
				t.Fatalf("job %s, want SUCCEEDED", st.State)
			}
			r.assertCountedOnce(t, 4)
		})
	}
}

// A holder that fails for good after its copy failed beside it: the
// holder's own attempt gets the failure in the history. The copy took
// the record's attempt number, so an end recorded under the record's
// attempt lands on the copy's (which already has its own end, and the
// first end recorded wins): the holder's attempt would show no end at
// all on a FAILED task.
func TestHolderFinalFailureAfterCopyIsItsOwn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		expires bool // the holder's executor dies instead of failing
	}{
		{name: "holder fails"},
		{name: "holder lease expires", expires: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := &speculationRig{sweepRig: newSweepRig(t, testTimings)}
			r.job = submitTo(t, r.svc, "spec1", `{"name":"spec1","lease":"10m","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"work",
				"partitions":{"count":4},"speculation":{"quantile":0.75,"multiplier":1.5,"maxCopies":4}}]}`)
			for p := range 4 {
				r.claims = append(r.claims, mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: p}))
			}
			ctx := context.Background()
			r.straggle(t, 1)
			orig, cp := r.claims[3], r.claimCopy(t, 3)
			if _, err := r.svc.Fail(ctx, cp, control.FailParams{Cause: "copy boom"}); err != nil {
				t.Fatalf("copy's failure: %v", err)
			}
			if tc.expires {
				r.clk.Advance(time.Hour)
				mustSweep(t, r.svc)
			} else if _, err := r.svc.Fail(ctx, orig, control.FailParams{Cause: "holder boom"}); err != nil {
				t.Fatalf("holder's failure: %v", err)
			}
			if task := r.task(t, 3); task.State != sm.TaskFailed {
				t.Fatalf("task %s after its last attempt ended, want FAILED", task.State)
			}
			if k := r.attemptEnd(t, 3, orig.Task.Attempt); k != domain.AttemptFailed {
				t.Fatalf("holder attempt %d's end %q, want %q", orig.Task.Attempt, k, domain.AttemptFailed)
			}
			if k := r.attemptEnd(t, 3, cp.Task.Attempt); k != control.AttemptFailedBesideCopy {
				t.Fatalf("copy attempt %d's end %q, want %q", cp.Task.Attempt, k, control.AttemptFailedBesideCopy)
			}
		})
	}
}

// A commit that rejected records and whose response is lost: the retry
// recognises its own success, and the stage's bad-record count holds the
// attempt's records once. Both commit shapes: one that leaves its shard
// counting (one transaction) and the shard's last (its second
// transaction, whose response is the one lost).
func TestBadRecordCommitLostResponseCountsOnce(t *testing.T) {
	t.Parallel()
	inj := faults.New(7)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		tasks int
	}{
		{"not last", 2},
		{"last", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := e.submit("lost-"+tc.name, fmt.Appendf(nil, `{"name":"lost","stages":[{"name":"s","task":"x","maxBadRecords":5,"partitions":{"count":%d}}]}`, tc.tasks))
			c := mustClaim(t, e.r.Service, domain.TaskRef{Job: id, Partition: 0})
			putOutput(t, e, c, "ok\n")
			inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost})
			var err error
			for range 5 { // an executor repeats a call that got no answer
				if err = e.r.Service.Commit(ctx, c, control.CommitResult{Outputs: 1, BadRecords: 3}); err == nil ||
					errors.Is(err, domain.ErrTooManyBadRecords) || errors.Is(err, domain.ErrStaleClaim) || errors.Is(err, domain.ErrAlreadyDone) {
					break
				}
			}
			if err != nil {
				t.Fatalf("commit whose response was lost: %v, want its own success recognised", err)
			}
			counts, err := e.r.Store.StageBadRecordCounts(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			task, err := e.r.Store.TaskGet(ctx, c.Task.Ref)
			if err != nil {
				t.Fatal(err)
			}
			if counts[0] != 3 || task.State != sm.TaskSucceeded || task.CommittedAttempt != c.Task.Attempt {
				t.Fatalf("bad-record count %d, task %s (attempt %d); want 3 and SUCCEEDED with attempt %d", counts[0], task.State, task.CommittedAttempt, c.Task.Attempt)
			}
		})
	}
}

// A job cancelled while a task runs with its copy: both claims stop (their
// heartbeats say the job ended or the claim is gone), the copy cannot be
// claimed again, the sweep cancels the task, which then lists no live
// copy, and neither claim commits late: the stage counts only the commits
// before the cancel, and the job stays CANCELLED.
func TestCancelStopsHolderAndCopy(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	r.straggle(t, 1)
	orig, cp := r.claims[3], r.claimCopy(t, 3)
	if _, err := r.svc.Cancel(ctx, "tester", r.job); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := r.svc.ClaimCopy(ctx, cp.Task.Ref); err == nil {
		t.Fatal("a copy was claimed after the job was cancelled")
	}
	for _, c := range []control.Claim{orig, cp} {
		if err := r.svc.Heartbeat(ctx, c); !errors.Is(err, domain.ErrJobNotRunning) && !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("heartbeat of attempt %d after the cancel: %v, want the job ended or the claim gone", c.Task.Attempt, err)
		}
	}
	for try := 0; r.task(t, 3).State != sm.TaskCancelled; try++ {
		if try == 5 {
			t.Fatalf("task %s after %d sweeps of its cancelled job, want CANCELLED", r.task(t, 3).State, try)
		}
		r.clk.Advance(time.Hour)
		mustSweep(t, r.svc)
	}
	list, err := r.svc.ListTasks(ctx, control.ListTasksRequest{Owner: "tester", ID: r.job})
	if err != nil {
		t.Fatal(err)
	}
	for _, ti := range list.Tasks {
		if ti.Copy != nil && ti.Copy.Live {
			t.Fatalf("task %d (%s) of a cancelled job lists a live copy", ti.Partition, ti.State)
		}
	}
	for _, c := range []control.Claim{orig, cp} {
		putOutput(t, r.e, c, "late\n")
		if err := r.svc.Commit(ctx, c, control.CommitResult{Outputs: 1}); err == nil {
			t.Fatalf("attempt %d of a cancelled task committed", c.Task.Attempt)
		}
	}
	st, err := r.e.r.Store.StageGet(ctx, r.job, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := r.e.r.Store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != sm.StageCancelled || p.Committed != 3 {
		t.Fatalf("stage %s with progress %+v, want CANCELLED with the 3 commits before the cancel", st.State, p)
	}
	if js := jobState(t, r.svc, r.job); js.State != string(sm.JobCancelled) {
		t.Fatalf("job %s, want CANCELLED", js.State)
	}
}

// A copy requested for an attempt that then failed and was retried is
// void: the new attempt is no straggler (it just started), so the sweep
// neither resends the old request's message nor counts it as a running
// copy. Before the fix the sweep resent it once StuckAfter had passed
// since the request, launching a copy of a fresh attempt at once.
func TestVoidCopyRequestIsNotResent(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 1)
	ctx := context.Background()
	if c := r.straggle(t, 1); c.Speculated != 1 {
		t.Fatalf("sweep launched %d copies, want 1", c.Speculated)
	}
	if got := r.copyMessages(t); len(got) != 1 {
		t.Fatalf("copy messages %v, want one", got)
	}
	d, err := r.svc.Fail(ctx, r.claims[3], control.FailParams{Cause: "boom"})
	if err != nil || !d.Retry {
		t.Fatalf("holder's failure before its copy started: %+v, %v; want a retry", d, err)
	}
	r.clk.Advance(d.Delay + time.Second)
	next := mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: 3})
	r.clk.Advance(testTimings.StuckAfter + time.Second) // past StuckAfter, well under 1.5x the median
	mustSweep(t, r.svc)
	if got := r.copyMessages(t); len(got) != 0 {
		t.Fatalf("sweep resent the void copy request of attempt %d beside attempt %d: %v", r.claims[3].Task.Attempt, next.Task.Attempt, got)
	}
}

// A holder whose copy failed beside it, and whose own executor then died:
// when the task's message comes back and the next claim takes over the
// expired lease (before any sweep expired it), the dead holder's attempt
// gets its end in the history. The claim knows only that the previous
// attempt number ended; beside a copy that is the copy's, and the
// holder's is the one before.
func TestReclaimAfterCopyNotesHolderEnd(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	r.straggle(t, 1)
	orig, cp := r.claims[3], r.claimCopy(t, 3)
	if _, err := r.svc.Fail(ctx, cp, control.FailParams{Cause: "copy boom"}); err != nil {
		t.Fatalf("copy's failure: %v", err)
	}
	r.clk.Advance(time.Hour) // the holder's lease has long run out
	next := mustClaim(t, r.svc, domain.TaskRef{Job: r.job, Partition: 3})
	if next.Task.Attempt != cp.Task.Attempt+1 {
		t.Fatalf("reclaim is attempt %d, want %d", next.Task.Attempt, cp.Task.Attempt+1)
	}
	if k := r.attemptEnd(t, 3, orig.Task.Attempt); k != domain.AttemptLeaseExpired {
		t.Fatalf("dead holder attempt %d's end %q, want %q", orig.Task.Attempt, k, domain.AttemptLeaseExpired)
	}
	if k := r.attemptEnd(t, 3, cp.Task.Attempt); k != control.AttemptFailedBesideCopy {
		t.Fatalf("copy attempt %d's end %q, want %q", cp.Task.Attempt, k, control.AttemptFailedBesideCopy)
	}
}
