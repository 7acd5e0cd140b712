package control

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// Claim, Commit and Fail against the in-memory store, queue and bucket of
// internal/testdouble. The integration tests run the same paths
// against an emulator; these pin each outcome down in milliseconds.

// taskCase is one scenario: a spec to submit, then steps and checks.
type taskCase struct {
	name  string
	spec  string
	opts  []func(*Config)
	setup func(r *unitRig) // before the submit, if set
	run   func(t *testing.T, r *unitRig, job string)
}

func runTaskCases(t *testing.T, cases []taskCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, c.opts...)
			if c.setup != nil {
				c.setup(r)
			}
			c.run(t, r, r.submit(c.spec))
		})
	}
}

func TestClaim(t *testing.T) {
	t.Parallel()
	runTaskCases(t, []taskCase{{
		name: "a READY task is claimed as attempt 1 with a fresh token and the spec's lease",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			now := r.clock.Now()
			c := r.claim(ref)
			if c.Task.State != sm.TaskClaimed || c.Task.Attempt != 1 || len(c.Task.Token) != 32 {
				t.Fatalf("claim = %s attempt %d token %q; want CLAIMED attempt 1 with a 32-hex token", c.Task.State, c.Task.Attempt, c.Task.Token)
			}
			if c.Lease != unitLease || !c.Task.LeaseUntil.Equal(now.Add(unitLease)) {
				t.Errorf("lease %v until %v; want %v until %v", c.Lease, c.Task.LeaseUntil, unitLease, now.Add(unitLease))
			}
			if c.StageName() != "s" || c.Spec == nil {
				t.Errorf("claim names stage %q, spec %v", c.StageName(), c.Spec)
			}
			if got := r.task(ref); got.Token != c.Task.Token || got.State != sm.TaskClaimed {
				t.Errorf("stored task %s token %q; want the claim's", got.State, got.Token)
			}
			// The sweep takes the claim back a grace (one lease) after it ends.
			if due := r.store.DueOf(taskItem(ref)); !due.Equal(now.Add(2 * unitLease)) {
				t.Errorf("task due %v, want %v", due, now.Add(2*unitLease))
			}
			if other := r.claim(taskRef(job, 0, 1)); other.Task.Token == c.Task.Token {
				t.Error("two claims got the same token")
			}
		},
	}, {
		name: "a duplicate delivery finds the claim held",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			first := r.claim(ref)
			r.clock.Advance(3 * time.Second)
			_, err := r.svc.Claim(r.ctx, ref)
			var held *domain.ClaimHeldError
			if !errors.As(err, &held) || !errors.Is(err, domain.ErrClaimHeld) {
				t.Fatalf("duplicate claim: %v, want *batch.ClaimHeldError", err)
			}
			// The duplicate comes back when the claim may be taken over:
			// not before its lease ends, and at most the skew after.
			if held.LeaseUntil.Before(first.Task.LeaseUntil) || held.LeaseUntil.After(first.Task.LeaseUntil.Add(sm.LeaseSkew)) {
				t.Errorf("held until %v; the lease ends %v", held.LeaseUntil, first.Task.LeaseUntil)
			}
			if got := r.task(ref); got.Token != first.Task.Token || got.Attempt != 1 {
				t.Errorf("task token %q attempt %d after the duplicate; want the first claim's", got.Token, got.Attempt)
			}
		},
	}, {
		name: "a claim is held until LeaseSkew past its lease, then taken over as attempt 2",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			first := r.claim(ref)
			r.clock.Advance(unitLease + sm.LeaseSkew)
			// A judge whose clock runs ahead must not fence a live holder.
			if _, err := r.svc.Claim(r.ctx, ref); !errors.Is(err, domain.ErrClaimHeld) {
				t.Fatalf("claim at lease+skew: %v, want held", err)
			}
			r.clock.Advance(time.Millisecond)
			second := r.claim(ref)
			if second.Task.Attempt != 2 || second.Task.Token == first.Task.Token {
				t.Fatalf("reclaim = attempt %d token %q; want attempt 2 with a new token", second.Task.Attempt, second.Task.Token)
			}
			if end, ok := r.store.AttemptEnd(ref, 1); !ok || end.Kind != domain.AttemptLeaseExpired {
				t.Errorf("attempt 1 end = %+v (%v), want lease_expired", end, ok)
			}
			if p := blob.AttemptPrefix(job, "s", 0, 1); !slices.Contains(r.blob.MarkedPrefixes(), p) {
				t.Errorf("outputs of the lost attempt under %s not marked uncommitted: %v", p, r.blob.MarkedPrefixes())
			}
			if err := r.svc.Heartbeat(r.ctx, first); !errors.Is(err, domain.ErrStaleClaim) {
				t.Errorf("heartbeat of the fenced holder: %v, want ErrStaleClaim", err)
			}
			if err := r.svc.Heartbeat(r.ctx, second); err != nil {
				t.Errorf("heartbeat of the holder: %v", err)
			}
		},
	}, {
		name: "a claim during backoff is not due, then succeeds as attempt 2",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			d, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "boom"})
			if err != nil || !d.Retry {
				t.Fatalf("fail = %+v, %v; want a retry", d, err)
			}
			notBefore := r.clock.Now().Add(d.Delay)
			_, err = r.svc.Claim(r.ctx, ref)
			var nd *domain.NotDueError
			if !errors.As(err, &nd) || !errors.Is(err, domain.ErrNotDue) || !nd.At.Equal(notBefore) {
				t.Fatalf("claim in backoff: %v, want *batch.NotDueError at %v", err, notBefore)
			}
			r.clock.Advance(d.Delay)
			if c := r.claim(ref); c.Task.Attempt != 2 {
				t.Errorf("claim after the backoff: attempt %d, want 2", c.Task.Attempt)
			}
		},
	}, {
		name: "an expired last attempt is exhausted: task, stage and job fail",
		spec: twoStages(1, 1),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			r.claim(ref)
			r.clock.Advance(unitLease + sm.LeaseSkew + time.Millisecond)
			_, err := r.svc.Claim(r.ctx, ref)
			if !errors.Is(err, domain.ErrAlreadyDone) || !strings.Contains(err.Error(), "lease expired on attempt 1 of 1") {
				t.Fatalf("claim of an expired last attempt: %v, want ErrAlreadyDone naming the expiry", err)
			}
			r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
			if st := r.stage(job, 1); st.State != sm.StageCancelled {
				t.Errorf("downstream stage %s, want CANCELLED", st.State)
			}
			reason := r.job(job).Error
			for _, want := range []string{`stage "s"`, "task 0", "lease expired"} {
				if !strings.Contains(reason, want) {
					t.Errorf("job error %q does not name %q", reason, want)
				}
			}
			if end, ok := r.store.AttemptEnd(ref, 1); !ok || end.Kind != domain.AttemptFailed {
				t.Errorf("attempt 1 end = %+v (%v), want failed", end, ok)
			}
			if due := r.store.DueOf(taskItem(ref)); !due.IsZero() {
				t.Errorf("failed task still in the sweep index at %v after its failure reached the job", due)
			}
		},
	}, {
		name: "a claim for a job that is not RUNNING cancels the task",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			if err := r.store.EndJob(r.ctx, job, sm.JobCancel, "cancelled by its owner", "", r.clock.Now()); err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Claim(r.ctx, ref); !errors.Is(err, domain.ErrJobNotRunning) {
				t.Fatalf("claim: %v, want ErrJobNotRunning", err)
			}
			if got := r.task(ref); got.State != sm.TaskCancelled || got.LastError != "job CANCELLED" {
				t.Errorf("task %s (%q), want CANCELLED by its job", got.State, got.LastError)
			}
		},
	}, {
		name: "a claim naming no job, stage or task is already done",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			for _, ref := range []domain.TaskRef{
				taskRef("j0000000000000000000000", 0, 0), // no such job
				taskRef(job, 4, 0),                       // no such stage
				taskRef(job, 0, 7),                       // no such task
			} {
				if _, err := r.svc.Claim(r.ctx, ref); !errors.Is(err, domain.ErrAlreadyDone) {
					t.Errorf("claim %s: %v, want ErrAlreadyDone", ref, err)
				}
			}
		},
	}, {
		name: "over maxConcurrency a claim is refused and a delayed copy of its message sent",
		spec: oneStage(2, 3, `,"maxConcurrency":1`),
		run: func(t *testing.T, r *unitRig, job string) {
			ref0, ref1 := taskRef(job, 0, 0), taskRef(job, 0, 1)
			c0 := r.claim(ref0)
			r.queue.Drain()
			_, err := r.svc.Claim(r.ctx, ref1)
			var ol *OverLimitError
			if !errors.Is(err, ErrOverLimit) || !errors.Is(err, domain.ErrAlreadyDone) || !errors.As(err, &ol) {
				t.Fatalf("claim over the limit: %v, want an *OverLimitError", err)
			}
			if want := (OverLimitError{Limit: "job", Name: job, Max: 1, RetryIn: kernel.OverLimitDelay}); *ol != want {
				t.Errorf("refusal %+v, want %+v", *ol, want)
			}
			if diff := cmp.Diff([]testdouble.Sent{{URL: "q-normal", Body: ref1.String(), Delay: kernel.OverLimitDelay}}, r.queue.Drain()); diff != "" {
				t.Errorf("messages sent (-want +got):\n%s", diff)
			}
			if got := r.task(ref1); got.State != sm.TaskReady || got.Attempt != 0 {
				t.Errorf("refused task %s attempt %d, want READY with no attempt spent", got.State, got.Attempt)
			}
			holders, err := r.store.SlotHolders(r.ctx, dynamo.JobSlots(job))
			if err != nil || len(holders) != 1 || !holders[ref0].Equal(c0.Task.SlotAt) {
				t.Errorf("slots %v (%v), want only %s's", holders, err, ref0)
			}
			// The holder's commit frees its slot for the waiting task.
			r.commit(c0, 0)
			if c1 := r.claim(ref1); c1.Task.Attempt != 1 {
				t.Errorf("claim after the slot was freed: attempt %d", c1.Task.Attempt)
			}
		},
	}, {
		name: "a duplicate delivery at the limit keeps the running attempt's slot",
		spec: oneStage(1, 3, `,"maxConcurrency":1`),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			c := r.claim(ref)
			r.clock.Advance(time.Second)
			if _, err := r.svc.Claim(r.ctx, ref); !errors.Is(err, domain.ErrClaimHeld) {
				t.Fatalf("duplicate: %v, want held", err)
			}
			holders, err := r.store.SlotHolders(r.ctx, dynamo.JobSlots(job))
			if err != nil || len(holders) != 1 || !holders[ref].Equal(c.Task.SlotAt) {
				t.Errorf("slots %v (%v), want %s stamped %v as its claim took it", holders, err, ref, c.Task.SlotAt)
			}
		},
	}, {
		name: "over the owner's limit a claim of another job is refused",
		spec: oneStage(1, 3, ""),
		opts: []func(*Config){func(c *Config) { c.OwnerLimits = OwnerLimits{Default: 1} }},
		run: func(t *testing.T, r *unitRig, job string) {
			other := r.submit(oneStage(1, 3, ""))
			r.claim(taskRef(job, 0, 0))
			_, err := r.svc.Claim(r.ctx, taskRef(other, 0, 0))
			var ol *OverLimitError
			if !errors.As(err, &ol) || ol.Limit != "owner" || ol.Name != "tester" || ol.Max != 1 {
				t.Fatalf("claim over the owner's limit: %v, want an owner *OverLimitError", err)
			}
		},
	}, {
		name: "a dead executor's claim is taken over as attempt 2 without waiting for its lease",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			ctxA, ctxB := WithExecutor(r.ctx, "exec-a"), WithExecutor(r.ctx, "exec-b")
			if err := r.svc.ExecutorAlive(r.ctx, "exec-a"); err != nil {
				t.Fatal(err)
			}
			promised := r.clock.Now().Add(tuning.ExecutorLease)
			first, err := r.svc.Claim(ctxA, ref)
			if err != nil || first.Task.Executor != "exec-a" {
				t.Fatalf("claim by exec-a: %+v, %v", first.Task, err)
			}
			// The same executor's duplicate is held, never taken over.
			if _, err := r.svc.Claim(ctxA, ref); !errors.Is(err, domain.ErrClaimHeld) {
				t.Fatalf("duplicate to the holder: %v, want held", err)
			}
			// exec-a has just renewed: it runs, so exec-b's message is a
			// copy, held until the task's lease allows a reclaim.
			_, err = r.svc.Claim(ctxB, ref)
			var held *domain.ClaimHeldError
			if !errors.As(err, &held) || !held.LeaseUntil.Equal(first.Task.LeaseUntil.Add(sm.LeaseSkew)) {
				t.Fatalf("claim by exec-b while exec-a lives: %v, want held until the lease %v", err, first.Task.LeaseUntil.Add(sm.LeaseSkew))
			}
			// exec-a's promise is about to lapse (no renewal for two
			// beats): the message may be its own, back for a takeover just
			// after the promise.
			r.clock.Advance(tuning.ExecutorLease - tuning.ExecutorBeat/2)
			_, err = r.svc.Claim(ctxB, ref)
			if !errors.As(err, &held) || !held.LeaseUntil.Equal(promised.Add(sm.LivenessSkew)) {
				t.Fatalf("claim by exec-b as exec-a's promise lapses: %v, want held until %v", err, promised.Add(sm.LivenessSkew))
			}
			r.clock.Advance(tuning.ExecutorBeat/2 + sm.LivenessSkew + time.Millisecond)
			second, err := r.svc.Claim(ctxB, ref)
			if err != nil || second.Task.Attempt != 2 || second.Task.Executor != "exec-b" || second.Task.Token == first.Task.Token {
				t.Fatalf("claim by exec-b after exec-a died: %+v, %v; want attempt 2 held by exec-b", second.Task, err)
			}
			if second.Task.LeaseUntil.After(first.Task.LeaseUntil.Add(unitLease)) || !second.Task.LeaseUntil.After(first.Task.LeaseUntil) {
				t.Errorf("new lease until %v", second.Task.LeaseUntil)
			}
			if end, ok := r.store.AttemptEnd(ref, 1); !ok || end.Kind != domain.AttemptLeaseExpired {
				t.Errorf("attempt 1 end %+v (%v), want lease_expired", end, ok)
			}
			if err := r.svc.Heartbeat(r.ctx, first); !errors.Is(err, domain.ErrStaleClaim) {
				t.Errorf("heartbeat of the dead executor's claim: %v, want ErrStaleClaim", err)
			}
		},
	}, {
		// Liveness only speeds recovery up: a last attempt whose executor
		// looks dead (it may be slow or cut off, not dead) is left to its
		// lease, and the job keeps running.
		name: "a dead executor's last attempt is left to its lease",
		spec: oneStage(1, 1, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			// exec-a never renewed: it has no liveness record at all.
			first, err := r.svc.Claim(WithExecutor(r.ctx, "exec-a"), ref)
			if err != nil {
				t.Fatal(err)
			}
			_, err = r.svc.Claim(WithExecutor(r.ctx, "exec-b"), ref)
			var held *domain.ClaimHeldError
			if !errors.As(err, &held) || !held.LeaseUntil.Equal(first.Task.LeaseUntil.Add(sm.LeaseSkew)) {
				t.Fatalf("claim of a dead executor's last attempt: %v, want held until its lease", err)
			}
			r.wantState(ref, sm.TaskClaimed, sm.StageRunning, sm.JobRunning)
		},
	}, {
		// A claim without an executor id (a remote executor) takes the
		// task over from a dead executor; the record must not keep the
		// dead one's id, or a copy of the message would judge the live
		// new claim by it and take it over again.
		name: "a claim without an executor clears the dead one's id",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			if _, err := r.svc.Claim(WithExecutor(r.ctx, "exec-a"), ref); err != nil {
				t.Fatal(err)
			}
			remote, err := r.svc.Claim(r.ctx, ref) // no id: takes over the dead exec-a's claim
			if err != nil || remote.Task.Attempt != 2 || remote.Task.Executor != "" {
				t.Fatalf("claim without an executor id: %+v, %v; want attempt 2 with no executor", remote.Task, err)
			}
			if _, err := r.svc.Claim(WithExecutor(r.ctx, "exec-b"), ref); !errors.Is(err, domain.ErrClaimHeld) {
				t.Fatalf("a copy reaching exec-b: %v, want held (the remote claim is live)", err)
			}
			if err := r.svc.Heartbeat(r.ctx, remote); err != nil {
				t.Fatalf("the remote holder's heartbeat: %v", err)
			}
		},
	}})
}

// Executors racing for one message: exactly one claim wins.
func TestClaimRace(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	ref := taskRef(r.submit(oneStage(1, 3, "")), 0, 0)
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = r.svc.Claim(r.ctx, ref) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, domain.ErrClaimHeld):
			t.Errorf("losing claim: %v, want held", err)
		}
	}
	if won != 1 || r.task(ref).Attempt != 1 {
		t.Fatalf("%d claims won, task at attempt %d; want exactly one", won, r.task(ref).Attempt)
	}
}

func TestCommit(t *testing.T) {
	t.Parallel()
	runTaskCases(t, []taskCase{{
		name: "outputs missing: nothing changes",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			c := r.claim(ref)
			r.output(c, 1)
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 2}); !errors.Is(err, ErrOutputsMissing) {
				t.Fatalf("commit naming a missing output: %v, want ErrOutputsMissing", err)
			}
			if n := r.store.CallCount("TaskCommit"); n != 0 {
				t.Errorf("CommitTask called %d times", n)
			}
			if got := r.task(ref); got.State != sm.TaskClaimed || got.Token != c.Task.Token {
				t.Errorf("task %s, want still the holder's claim", got.State)
			}
			if left := r.shardLeft(job, 0, 0); left != 2 {
				t.Errorf("%d tasks left, want 2", left)
			}
		},
	}, {
		name: "the holder commits; the last commit completes the stage and the job",
		spec: oneStage(3, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			cs := []Claim{r.claim(taskRef(job, 0, 0)), r.claim(taskRef(job, 0, 1)), r.claim(taskRef(job, 0, 2))}
			r.commit(cs[0], 2)
			got := r.task(cs[0].Task.Ref)
			if got.State != sm.TaskSucceeded || got.CommittedAttempt != 1 || got.Outputs != 2 || !got.LeaseUntil.IsZero() {
				t.Errorf("committed task %s attempt %d outputs %d lease %v", got.State, got.CommittedAttempt, got.Outputs, got.LeaseUntil)
			}
			if due := r.store.DueOf(taskItem(got.Ref)); !due.IsZero() {
				t.Errorf("committed task in the sweep index at %v", due)
			}
			if left := r.shardLeft(job, 0, 0); left != 2 {
				t.Errorf("%d tasks left after one commit, want 2", left)
			}
			r.wantState(cs[0].Task.Ref, "", sm.StageRunning, sm.JobRunning)
			r.commit(cs[1], 1)
			r.commit(cs[2], 0)
			r.wantState(cs[2].Task.Ref, sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
			j := r.job(job)
			if j.Manifest != blob.JobManifestKey(job) {
				t.Fatalf("job manifest %q, want %q", j.Manifest, blob.JobManifestKey(job))
			}
			want := []string{
				blob.OutputKey(job, "s", 0, 1, 0), blob.OutputKey(job, "s", 0, 1, 1), blob.OutputKey(job, "s", 1, 1, 0),
			}
			if diff := cmp.Diff(want, r.manifestKeys(j.Manifest)); diff != "" {
				t.Errorf("manifest (-want +got):\n%s", diff)
			}
			if due := r.store.DueOf(stageItem(job, 0)); !due.IsZero() {
				t.Errorf("completed stage in the sweep index at %v", due)
			}
		},
	}, {
		name: "a committer that dies before its stage's follow-up leaves it to the sweep within the follow-up grace",
		spec: oneStage(1, 3, ""),
		// The deployed timings: a running stage is checked every minute.
		opts: []func(*Config){func(c *Config) { c.CheckEvery, c.FollowUpGrace = time.Minute, 5*time.Second }},
		run: func(t *testing.T, r *unitRig, job string) {
			r.clock.Advance(10 * time.Second)
			r.sweep()
			if due, limit := r.store.DueOf(stageItem(job, 0)), r.clock.Now().Add(r.svc.cfg.FollowUpGrace); !due.After(limit) {
				t.Fatalf("stage due at %v before the commit; the test needs it after %v", due, limit)
			}
			c := r.claim(taskRef(job, 0, 0))
			r.output(c, 1)
			// The committer "dies" right after its commit applied: the
			// follow-up's first read fails.
			r.store.SetFaults(func(method string) error {
				if method == "StageGet" && r.store.CallCount("TaskCommit") > 0 {
					return testdouble.ErrInjected
				}
				return nil
			}, nil)
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, testdouble.ErrInjected) {
				t.Fatalf("commit: %v, want the follow-up's injected failure", err)
			}
			r.store.SetFaults(nil, nil)
			r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageRunning, sm.JobRunning)
			limit := r.clock.Now().Add(r.svc.cfg.FollowUpGrace)
			if due := r.store.DueOf(stageItem(job, 0)); due.IsZero() || due.After(limit) {
				t.Fatalf("stage due at %v; want by %v, so the sweep finishes it soon", due, limit)
			}
		},
	}, {
		name: "a stale attempt is fenced, its outputs marked, and the manifest lists only committed attempts",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			ref := taskRef(job, 0, 0)
			stale := r.claim(ref)
			r.output(stale, 1)
			r.clock.Advance(unitLease + sm.LeaseSkew + time.Millisecond)
			cur := r.claim(ref)
			if err := r.svc.Commit(r.ctx, stale, CommitResult{Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) {
				t.Fatalf("commit of the fenced attempt: %v, want ErrStaleClaim", err)
			}
			if got := r.task(ref); got.State != sm.TaskClaimed || got.Attempt != 2 || got.Token != cur.Task.Token {
				t.Errorf("task %s attempt %d after the stale commit; want attempt 2 still claimed", got.State, got.Attempt)
			}
			if left := r.shardLeft(job, 0, 0); left != 2 {
				t.Errorf("stale commit counted: %d left, want 2", left)
			}
			if p := blob.AttemptPrefix(job, "s", 0, 1); !slices.Contains(r.blob.MarkedPrefixes(), p) {
				t.Errorf("stale outputs under %s not marked: %v", p, r.blob.MarkedPrefixes())
			}
			r.commit(cur, 1)
			r.commit(r.claim(taskRef(job, 0, 1)), 1)
			want := []string{blob.OutputKey(job, "s", 0, 2, 0), blob.OutputKey(job, "s", 1, 1, 0)}
			if diff := cmp.Diff(want, r.manifestKeys(blob.JobManifestKey(job))); diff != "" {
				t.Errorf("manifest (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "a repeated commit is recognised and counted once, and finishes what a lost response left",
		spec: oneStage(2, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c0, c1 := r.claim(taskRef(job, 0, 0)), r.claim(taskRef(job, 0, 1))
			r.commit(c0, 1)
			if err := r.svc.Commit(r.ctx, c0, CommitResult{Outputs: 1}); err != nil {
				t.Fatalf("repeated commit: %v", err)
			}
			if left := r.shardLeft(job, 0, 0); left != 1 {
				t.Fatalf("%d left after a repeated commit, want 1", left)
			}
			r.output(c1, 1)
			r.store.SetFaults(nil, testdouble.FailOnce("TaskCommit"))
			if err := r.svc.Commit(r.ctx, c1, CommitResult{Outputs: 1}); !errors.Is(err, testdouble.ErrInjected) {
				t.Fatalf("commit with a lost response: %v", err)
			}
			// The commit applied; the follow-up (completing the stage) did not run.
			r.wantState(c1.Task.Ref, sm.TaskSucceeded, sm.StageRunning, sm.JobRunning)
			if err := r.svc.Commit(r.ctx, c1, CommitResult{Outputs: 1}); err != nil {
				t.Fatalf("commit retried after a lost response: %v", err)
			}
			if left := r.shardLeft(job, 0, 0); left != 0 {
				t.Errorf("%d left, want 0 (a retry must not count again)", left)
			}
			r.wantState(c1.Task.Ref, sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		},
	}, {
		name: "a commit that contention kept from applying is retried",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c := r.claim(taskRef(job, 0, 0))
			r.output(c, 1)
			r.store.SetFaults(testdouble.FailOnceWith("TaskCommit", dynamo.ErrContention), nil)
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); !errors.Is(err, dynamo.ErrContention) {
				t.Fatalf("commit: %v, want ErrContention", err)
			}
			r.wantState(c.Task.Ref, sm.TaskClaimed, sm.StageRunning, sm.JobRunning)
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); err != nil {
				t.Fatalf("retried commit: %v", err)
			}
			r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		},
	}, {
		name: "a late commit of a cancelled job's task stands but cannot complete its stage",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c := r.claim(taskRef(job, 0, 0))
			if err := r.store.EndJob(r.ctx, job, sm.JobCancel, "cancelled", "", r.clock.Now()); err != nil {
				t.Fatal(err)
			}
			r.commit(c, 1)
			// sm.GuardJobRunning refused the completion: no downstream
			// start, no job manifest for a cancelled job.
			r.wantState(c.Task.Ref, sm.TaskSucceeded, sm.StageRunning, sm.JobCancelled)
			if _, ok := r.blob.Object(blob.JobManifestKey(job)); ok {
				t.Error("a cancelled job got a manifest")
			}
			r.clock.Advance(unitTimings.CheckEvery)
			r.sweep()
			if st := r.stage(job, 0); st.State != sm.StageCancelled {
				t.Errorf("stage %s after the sweep, want CANCELLED", st.State)
			}
		},
	}, {
		name: "a commit of a cancelled task is already done",
		spec: oneStage(1, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			c := r.claim(taskRef(job, 0, 0))
			if err := r.store.TaskSweep(r.ctx, dynamo.SweepTaskParams{Ref: c.Task.Ref, Event: sm.TaskCancel, Now: r.clock.Now(), Err: "job CANCELLED"}); err != nil {
				t.Fatal(err)
			}
			if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 0}); !errors.Is(err, domain.ErrAlreadyDone) {
				t.Fatalf("commit: %v, want ErrAlreadyDone", err)
			}
		},
	}, {
		name: "a stage after two upstreams starts once both completed, and only sinks reach the manifest",
		spec: `{"name":"unit","lease":"10s","stages":[` +
			`{"name":"a","task":"work","partitions":{"count":2}},` +
			`{"name":"b","task":"work","partitions":{"count":1}},` +
			`{"name":"c","task":"work","after":["a","b"],"partitions":{"count":1}}]}`,
		run: func(t *testing.T, r *unitRig, job string) {
			a0, a1, b0 := r.claim(taskRef(job, 0, 0)), r.claim(taskRef(job, 0, 1)), r.claim(taskRef(job, 1, 0))
			r.queue.Drain()
			r.commit(a0, 1)
			r.commit(a1, 1)
			if a, c := r.stage(job, 0), r.stage(job, 2); a.State != sm.StageCompleted || c.State != sm.StageBlocked {
				t.Fatalf("after a: a %s, c %s; want COMPLETED, BLOCKED", a.State, c.State)
			}
			if sent := r.queue.Drain(); len(sent) != 0 {
				t.Fatalf("messages before c's second upstream completed: %v", sent)
			}
			r.commit(b0, 1)
			c := r.stage(job, 2)
			if c.State != sm.StageRunning || !c.Materialized || c.Total != 1 {
				t.Fatalf("c after both upstreams: %+v", c)
			}
			if diff := cmp.Diff([]testdouble.Sent{{URL: "q-normal", Body: taskRef(job, 2, 0).String()}}, r.queue.Drain()); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
			r.commit(r.claim(taskRef(job, 2, 0)), 2)
			r.wantState(taskRef(job, 2, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
			want := []string{blob.OutputKey(job, "c", 0, 1, 0), blob.OutputKey(job, "c", 0, 1, 1)}
			if diff := cmp.Diff(want, r.manifestKeys(blob.JobManifestKey(job))); diff != "" {
				t.Errorf("manifest (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "a stage of several counter shards completes only when all are empty",
		spec: oneStage(300, 3, ""),
		run: func(t *testing.T, r *unitRig, job string) {
			shards := r.stage(job, 0).Shards
			if shards < 2 || shards != dynamo.ShardCount(300) {
				t.Fatalf("%d shards for 300 tasks, want dynamo.ShardCount's %d (at least 2)", shards, dynamo.ShardCount(300))
			}
			for p := 1; p < 300; p++ {
				r.commit(r.claim(taskRef(job, 0, p)), 0)
			}
			// Only partition 0's shard still counts a task.
			for sh := range shards {
				want := 0
				if sh == dynamo.ShardOf(0, shards) {
					want = 1
				}
				if left := r.shardLeft(job, 0, sh); left != want {
					t.Fatalf("shard %d has %d left, want %d", sh, left, want)
				}
			}
			r.wantState(taskRef(job, 0, 1), "", sm.StageRunning, sm.JobRunning)
			r.commit(r.claim(taskRef(job, 0, 0)), 1)
			r.wantState(taskRef(job, 0, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		},
	}})
}

func TestFail(t *testing.T) {
	t.Parallel()
	const cause = "boom: disk full"
	cases := []struct {
		name        string
		maxAttempts int
		retried     int // attempts that failed and retried before this one
		wantDelay   time.Duration
		wantRetry   bool
	}{
		{name: "the first of three retries after the base backoff", maxAttempts: 3, retried: 0, wantRetry: true, wantDelay: 2 * time.Second},
		{name: "the second of three retries after twice the base", maxAttempts: 3, retried: 1, wantRetry: true, wantDelay: 4 * time.Second},
		{name: "the third of four retries after four times the base", maxAttempts: 4, retried: 2, wantRetry: true, wantDelay: 8 * time.Second},
		{name: "the last of three fails the task, the stage and the job", maxAttempts: 3, retried: 2},
		{name: "a single attempt fails at once", maxAttempts: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			job := r.submit(twoStages(1, c.maxAttempts))
			ref := taskRef(job, 0, 0)
			for range c.retried {
				d, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: "earlier"})
				if err != nil || !d.Retry {
					t.Fatalf("earlier failure: %+v, %v", d, err)
				}
				r.clock.Advance(d.Delay)
			}
			cl := r.claim(ref)
			now := r.clock.Now()
			d, err := r.svc.Fail(r.ctx, cl, FailParams{Cause: cause})
			if err != nil {
				t.Fatalf("fail: %v", err)
			}
			if want := (Decision{Retry: c.wantRetry, Delay: c.wantDelay}); d != want {
				t.Fatalf("decision %+v, want %+v", d, want)
			}
			got := r.task(ref)
			end, _ := r.store.AttemptEnd(ref, cl.Task.Attempt)
			if c.wantRetry {
				if got.State != sm.TaskReady || got.Attempt != c.retried+1 || !got.NotBefore.Equal(now.Add(c.wantDelay)) || got.LastError != cause {
					t.Errorf("task %s attempt %d not before %v error %q; want READY not before %v", got.State, got.Attempt, got.NotBefore, got.LastError, now.Add(c.wantDelay))
				}
				// The sweep looks again once the backoff and StuckAfter passed.
				if due, want := r.store.DueOf(taskItem(ref)), now.Add(c.wantDelay+unitTimings.StuckAfter); !due.Equal(want) {
					t.Errorf("task due %v, want %v", due, want)
				}
				if end.Kind != domain.AttemptRetried || end.Err != cause {
					t.Errorf("attempt end %+v, want retried with the cause", end)
				}
				r.wantState(ref, "", sm.StageRunning, sm.JobRunning)
				return
			}
			r.wantState(ref, sm.TaskFailed, sm.StageFailed, sm.JobFailed)
			reason := fmt.Sprintf("stage %q task 0 failed after %d attempts: %s", "s", c.maxAttempts, cause)
			if j, st := r.job(job), r.stage(job, 0); j.Error != reason || st.Error != reason {
				t.Errorf("job error %q, stage error %q; want %q", j.Error, st.Error, reason)
			}
			if st := r.stage(job, 1); st.State != sm.StageCancelled {
				t.Errorf("downstream stage %s, want CANCELLED", st.State)
			}
			if end.Kind != domain.AttemptFailed {
				t.Errorf("attempt end %+v, want failed", end)
			}
			if due := r.store.DueOf(taskItem(ref)); !due.IsZero() {
				t.Errorf("failed task in the sweep index at %v after its failure reached the job", due)
			}
		})
	}
}

func TestFailFencedAndTruncated(t *testing.T) {
	t.Parallel()
	t.Run("a fenced holder's failure is stale", func(t *testing.T) {
		t.Parallel()
		r := newUnitRig(t)
		ref := taskRef(r.submit(oneStage(1, 3, "")), 0, 0)
		stale := r.claim(ref)
		r.clock.Advance(unitLease + sm.LeaseSkew + time.Millisecond)
		cur := r.claim(ref)
		if _, err := r.svc.Fail(r.ctx, stale, FailParams{Cause: "late"}); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("fail: %v, want ErrStaleClaim", err)
		}
		if got := r.task(ref); got.State != sm.TaskClaimed || got.Token != cur.Task.Token {
			t.Errorf("task %s after a stale failure, want the current claim", got.State)
		}
	})
	t.Run("a long cause is truncated", func(t *testing.T) {
		t.Parallel()
		r := newUnitRig(t)
		ref := taskRef(r.submit(oneStage(1, 3, "")), 0, 0)
		if _, err := r.svc.Fail(r.ctx, r.claim(ref), FailParams{Cause: strings.Repeat("x", 4*MaxErrorLen)}); err != nil {
			t.Fatal(err)
		}
		if got := r.task(ref).LastError; got != "…"+strings.Repeat("x", MaxErrorLen-len("…")) {
			t.Errorf("stored error of %d bytes, want an ellipsis and the cause's last bytes, %d in all", len(got), MaxErrorLen)
		}
	})
}

// A dead executor's messages come back just as the takeover guard allows
// a takeover (its promise plus the skew), so the first receiver takes the
// task over instead of bouncing it: see tuning.HeldVisibility.
func TestHeldVisibilityMatchesTakeoverGuard(t *testing.T) {
	if want := tuning.ExecutorLease + sm.LivenessSkew; tuning.HeldVisibility != want {
		t.Fatalf("held visibility %v, want the executor lease plus the skew, %v", tuning.HeldVisibility, want)
	}
}
