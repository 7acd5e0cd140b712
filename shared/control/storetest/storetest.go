// Package storetest is the conformance suite of the control plane's store
// port: the same cases, run against every implementation (the tests'
// in-memory testdouble.Store, dynamo.Store on DynamoDB Local in
// integration), so that the fake cannot drift from the conditions the
// real store enforces. Each case checks an outcome the control plane's
// invariants stand on: submit idempotency, one live claim, heartbeats and
// commits fenced by the claim token, a stage's countdown and completion
// exactly once, a job that ends once, transitions refused once their
// job ended or was redriven, and a redrive whose steps each apply once
// per generation and only while the job is where the redrive found it.
//
// Nothing shipped imports this package.
package storetest

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Store is the part of control.Store the suite exercises. It is declared
// here rather than taken from shared/control so that the suite imports
// nothing of the code it checks, and any package's tests can run it;
// storetest_test.go checks that control.Store includes it.
type Store interface {
	JobCreate(context.Context, dynamo.CreateJobParams) (string, bool, error)
	JobGet(context.Context, string) (domain.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error)
	JobEndEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error)
	StageGet(context.Context, string, int) (domain.Stage, error)
	StageTransition(context.Context, dynamo.StageTransitionParams) error
	StageSetPlan(ctx context.Context, job string, idx, total int) (domain.Stage, error)
	StageSetSegments(ctx context.Context, job string, idx, size int) (domain.Stage, error)
	StageAdvanceSegment(ctx context.Context, job string, idx, seg, from, to int, due time.Time) (bool, error)
	ShardPut(ctx context.Context, job string, idx, total, shards int) error
	ShardLeft(ctx context.Context, job string, idx, shard int) (int, error)
	TaskPutMany(context.Context, []domain.Task, time.Time) error
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
	TaskClaim(context.Context, dynamo.ClaimParams) (domain.Task, error)
	TaskHeartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	TaskCommit(context.Context, dynamo.CommitParams) (shardDone bool, err error)
	TaskRelease(context.Context, dynamo.ReleaseParams) (domain.Task, error)
	TaskCancel(context.Context, dynamo.TaskCancelParams) (domain.Task, error)
	JobRedriveCount(ctx context.Context, id string) (int, error)
	JobStart(context.Context, dynamo.JobStartParams) error
	JobRedrive(context.Context, dynamo.RedriveJobParams) error
	StageRedrive(ctx context.Context, job string, idx int, ev sm.Event, now, due time.Time) error
	TaskRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int, now, notBefore, due time.Time) error
	TaskRaiseAttempts(ctx context.Context, ref domain.TaskRef, budget, gen int) error
	TaskMarkRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int) error
}

// Run runs every case against a store newStore returns. Each case makes
// its own job ids and keys, so one store may serve them all.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, &rig{t: t, s: newStore(t), ctx: context.Background(), now: time.Now().UTC().Truncate(time.Millisecond)})
		})
	}
}

const (
	lease = time.Minute
	owner = "conformance"
)

var cases = []struct {
	name string
	run  func(t *testing.T, r *rig)
}{
	{"submit is idempotent per owner and key", func(t *testing.T, r *rig) {
		key := "k-" + randHex(4)
		first := r.create(owner, key, 1)
		again, created, err := r.s.JobCreate(r.ctx, r.jobParams(owner, key, 1))
		if err != nil || created || again != first {
			t.Fatalf("same key again: %s, created %v, %v; want %s, not created", again, created, err, first)
		}
		if _, _, err := r.s.JobCreate(r.ctx, r.jobParams(owner, key, 2)); !errors.Is(err, domain.ErrIdempotencyConflict) {
			t.Fatalf("same key, another spec: %v; want batch.ErrIdempotencyConflict", err)
		}
		if id, found, err := r.s.JobByIdemKey(r.ctx, owner, key); err != nil || !found || id != first {
			t.Fatalf("IdempotentJob: %s, %v, %v; want %s", id, found, err, first)
		}
		if _, found, err := r.s.JobByIdemKey(r.ctx, owner+"-other", key); err != nil || found {
			t.Fatalf("another owner's key: found %v, %v; want none", found, err)
		}
		if other := r.create(owner+"-other", key, 1); other == first {
			t.Fatalf("another owner's same key answered %s's job", owner)
		}
	}},
	{"a live claim is the only one", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		a := r.claim(ref, "tok-a")
		if a.State != sm.TaskClaimed || a.Attempt != 1 || a.Token != "tok-a" {
			t.Fatalf("first claim: %s attempt %d token %q; want CLAIMED attempt 1 tok-a", a.State, a.Attempt, a.Token)
		}
		_, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: ref, Token: "tok-b", Now: r.now, Lease: lease, Grace: lease})
		var held *domain.ClaimHeldError
		if !errors.As(err, &held) {
			t.Fatalf("second claim under a live lease: %v; want *batch.ClaimHeldError", err)
		}
		if got := r.task(ref); got.Token != "tok-a" || got.Attempt != 1 {
			t.Fatalf("after the refused claim: token %q attempt %d; want tok-a, 1", got.Token, got.Attempt)
		}
	}},
	{"a claim whose answer was lost is recognised by its token", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		r.claim(ref, "tok-a")
		again, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: ref, Token: "tok-a", Now: r.now, Lease: lease, Grace: lease})
		if err != nil || again.Attempt != 1 || again.Token != "tok-a" {
			t.Fatalf("retried claim: attempt %d token %q, %v; want its own claim, attempt 1", again.Attempt, again.Token, err)
		}
	}},
	{"a claim whose lease expired is taken over with a new attempt", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		r.claim(ref, "tok-a")
		later := r.now.Add(lease + sm.LeaseSkew + time.Second)
		b, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: ref, Token: "tok-b", Now: later, Lease: lease, Grace: lease})
		if err != nil || b.Attempt != 2 || b.Token != "tok-b" {
			t.Fatalf("takeover: attempt %d token %q, %v; want attempt 2 tok-b", b.Attempt, b.Token, err)
		}
		if err := r.s.TaskHeartbeat(r.ctx, dynamo.HolderParams{Ref: ref, Token: "tok-a", Now: later}, lease, lease); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("old holder's heartbeat: %v; want batch.ErrStaleClaim", err)
		}
	}},
	{"a heartbeat renews only with the holder's token", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		r.claim(ref, "tok-a")
		at := r.now.Add(lease / 2)
		if err := r.s.TaskHeartbeat(r.ctx, dynamo.HolderParams{Ref: ref, Token: "tok-x", Now: at}, lease, lease); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("heartbeat with another token: %v; want batch.ErrStaleClaim", err)
		}
		if got := r.task(ref); !got.LeaseUntil.Equal(r.now.Add(lease)) {
			t.Fatalf("lease after a refused heartbeat: %s; want %s", got.LeaseUntil, r.now.Add(lease))
		}
		if err := r.s.TaskHeartbeat(r.ctx, dynamo.HolderParams{Ref: ref, Token: "tok-a", Now: at}, lease, lease); err != nil {
			t.Fatalf("holder's heartbeat: %v", err)
		}
		if got := r.task(ref); !got.LeaseUntil.Equal(at.Add(lease)) {
			t.Fatalf("lease after the holder's heartbeat: %s; want %s", got.LeaseUntil, at.Add(lease))
		}
	}},
	{"a commit is fenced by the claim token", func(t *testing.T, r *rig) {
		refs := r.stage(2)
		ref := refs[0]
		a := r.claim(ref, "tok-a")
		if _, err := r.s.TaskCommit(r.ctx, r.commit(ref, "tok-x", a.Attempt)); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("commit with another token: %v; want batch.ErrStaleClaim", err)
		}
		if got := r.task(ref); got.State != sm.TaskClaimed {
			t.Fatalf("task after a refused commit: %s; want CLAIMED", got.State)
		}
		if _, err := r.s.TaskCommit(r.ctx, r.commit(ref, "tok-a", a.Attempt)); err != nil {
			t.Fatalf("holder's commit: %v", err)
		}
		shard := dynamo.ShardOf(ref.Partition, r.shards)
		left := r.left(shard)
		// A retry of the commit (its answer lost) is its own success,
		// counted once.
		if _, err := r.s.TaskCommit(r.ctx, r.commit(ref, "tok-a", a.Attempt)); err != nil {
			t.Fatalf("retried commit: %v; want its own success", err)
		}
		if got := r.left(shard); got != left {
			t.Fatalf("counter after a retried commit: %d; want %d (counted once)", got, left)
		}
		if got := r.task(ref); got.State != sm.TaskSucceeded || got.CommittedAttempt != a.Attempt {
			t.Fatalf("task after commit: %s committed attempt %d; want SUCCEEDED %d", got.State, got.CommittedAttempt, a.Attempt)
		}
		if _, err := r.s.TaskCommit(r.ctx, r.commit(ref, "tok-x", a.Attempt)); !errors.Is(err, domain.ErrAlreadyDone) && !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("stale commit of a committed task: %v; want batch.ErrAlreadyDone or batch.ErrStaleClaim", err)
		}
	}},
	{"a stage counts down to complete exactly once", func(t *testing.T, r *rig) {
		refs := r.stage(5)
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now}); err != nil {
			t.Fatalf("start stage: %v", err)
		}
		emptied := map[int]int{}
		for i, ref := range refs {
			tok := fmt.Sprintf("tok-%d", i)
			c := r.claim(ref, tok)
			done, err := r.s.TaskCommit(r.ctx, r.commit(ref, tok, c.Attempt))
			if err != nil {
				t.Fatalf("commit %s: %v", ref, err)
			}
			if done {
				emptied[dynamo.ShardOf(ref.Partition, r.shards)]++
			}
		}
		for sh := range r.shards {
			if emptied[sh] != 1 || r.left(sh) != 0 {
				t.Errorf("shard %d: emptied by %d commits, %d left; want emptied by one, 0 left", sh, emptied[sh], r.left(sh))
			}
		}
		complete := dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageComplete, Now: r.now}
		if err := r.s.StageTransition(r.ctx, complete); err != nil {
			t.Fatalf("complete stage: %v", err)
		}
		if err := r.s.StageTransition(r.ctx, complete); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("complete stage again: %v; want sm.ErrInvalidTransition", err)
		}
		if st, err := r.s.StageGet(r.ctx, r.job, 0); err != nil || st.State != sm.StageCompleted {
			t.Fatalf("stage: %s, %v; want COMPLETED", st.State, err)
		}
	}},
	{"a job ends once, and its state copies say so", func(t *testing.T, r *rig) {
		r.stage(1)
		if st, err := r.s.JobState(r.ctx, r.job); err != nil || st != sm.JobRunning {
			t.Fatalf("state of a new job: %s, %v; want RUNNING", st, err)
		}
		if _, err := r.s.JobEndEvent(r.ctx, r.job, sm.JobCancel, "cancelled by its owner", "", r.now); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		if st, err := r.s.JobState(r.ctx, r.job); err != nil || st != sm.JobCancelled {
			t.Fatalf("state after cancel: %s, %v; want CANCELLED", st, err)
		}
		if j, err := r.s.JobGet(r.ctx, r.job); err != nil || j.State != sm.JobCancelled || j.Error != "cancelled by its owner" {
			t.Fatalf("job after cancel: %s %q, %v; want CANCELLED with its reason", j.State, j.Error, err)
		}
		if _, err := r.s.JobEndEvent(r.ctx, r.job, sm.JobFail, "late failure", "", r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("fail a cancelled job: %v; want sm.ErrInvalidTransition", err)
		}
		if st, err := r.s.JobState(r.ctx, r.job); err != nil || st != sm.JobCancelled {
			t.Fatalf("state after the refused end: %s, %v; want CANCELLED", st, err)
		}
	}},
	{"a cancelled job's stages cannot start or complete", func(t *testing.T, r *rig) {
		r.stage(1)
		if _, err := r.s.JobEndEvent(r.ctx, r.job, sm.JobCancel, "cancelled", "", r.now); err != nil {
			t.Fatalf("cancel: %v", err)
		}
		err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now})
		if !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("start a cancelled job's stage: %v; want sm.ErrInvalidTransition", err)
		}
		if st, err := r.s.StageGet(r.ctx, r.job, 0); err != nil || st.State != sm.StageBlocked {
			t.Fatalf("stage: %s, %v; want BLOCKED", st.State, err)
		}
	}},
	{"a stage's segments are set once and each counts on only from where it stands, while the stage runs", func(t *testing.T, r *rig) {
		r.stage(25)
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now}); err != nil {
			t.Fatalf("start: %v", err)
		}
		st, err := r.s.StageSetSegments(r.ctx, r.job, 0, 10)
		if err != nil || st.SegmentTasks != 10 || st.SegmentCount() != 3 || st.SegmentNext(1) != 10 || st.SegmentNext(2) != 20 {
			t.Fatalf("segments of 10: %+v, %v; want 3 segments from 0, 10 and 20", st, err)
		}
		if st, err = r.s.StageSetSegments(r.ctx, r.job, 0, 5); err != nil || st.SegmentTasks != 10 {
			t.Fatalf("segments set again with 5: %+v, %v; want the first size, 10", st, err)
		}
		due := r.now.Add(time.Minute)
		for _, c := range []struct {
			seg, from, to int
			want          bool
		}{{1, 10, 15, true}, {1, 10, 15, false}, {2, 10, 15, false}, {2, 20, 25, true}, {0, 0, 5, true}} {
			if got, err := r.s.StageAdvanceSegment(r.ctx, r.job, 0, c.seg, c.from, c.to, due); err != nil || got != c.want {
				t.Fatalf("advance segment %d from %d to %d: %v, %v; want %v", c.seg, c.from, c.to, got, err, c.want)
			}
		}
		st, err = r.s.StageGet(r.ctx, r.job, 0)
		if err != nil || st.Enqueued != 5 || st.SegmentNext(1) != 15 || !st.SegmentDone(2) || st.AllSent() {
			t.Fatalf("stage %+v, %v; want segments at 5, 15 and done", st, err)
		}
		for p, want := range map[int]bool{4: true, 5: false, 14: true, 15: false, 20: true, 24: true} {
			if st.Sent(p) != want {
				t.Errorf("partition %d sent %v, want %v", p, !want, want)
			}
		}
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageCancel, Now: r.now}); err != nil {
			t.Fatalf("cancel the stage: %v", err)
		}
		if got, err := r.s.StageAdvanceSegment(r.ctx, r.job, 0, 1, 15, 20, due); err != nil || got {
			t.Fatalf("advance a cancelled stage's segment: %v, %v; want false", got, err)
		}
	}},
	{"a stage part way through one chain is split with each segment starting where that chain left it", func(t *testing.T, r *rig) {
		r.stage(35)
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now}); err != nil {
			t.Fatalf("start: %v", err)
		}
		if ok, err := r.s.StageAdvanceSegment(r.ctx, r.job, 0, 0, 0, 13, r.now.Add(time.Minute)); err != nil || !ok {
			t.Fatalf("one chain to 13: %v, %v", ok, err)
		}
		st, err := r.s.StageSetSegments(r.ctx, r.job, 0, 10)
		if err != nil || st.SegmentCount() != 4 || st.Enqueued != 13 || st.SegmentNext(1) != 13 || st.SegmentNext(2) != 20 || st.SegmentNext(3) != 30 {
			t.Fatalf("segments of 10 after 13 queued: %+v, %v; want segment 1 at 13, 2 at 20, 3 at 30", st, err)
		}
		for p, want := range map[int]bool{9: true, 10: true, 12: true, 13: false, 20: false} {
			if st.Sent(p) != want {
				t.Errorf("partition %d sent %v, want %v", p, !want, want)
			}
		}
	}},
	{"a stage transition decided at another redrive is refused", func(t *testing.T, r *rig) {
		r.stage(1)
		gen := 1 // the job was never redriven: its count is 0
		err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now, Redrives: &gen})
		if !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("transition decided at redrive 1: %v; want sm.ErrInvalidTransition", err)
		}
		gen = 0
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: sm.StageStart, Now: r.now, Redrives: &gen}); err != nil {
			t.Fatalf("transition decided at redrive 0: %v", err)
		}
	}},
	{"a job is redriven once per count, only from FAILED", func(t *testing.T, r *rig) {
		r.stage(1)
		redrive := dynamo.RedriveJobParams{ID: r.job, Count: 0, Now: r.now, PrevError: "it broke", FollowUp: r.now.Add(time.Minute)}
		if err := r.s.JobRedrive(r.ctx, redrive); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("redrive a running job: %v; want sm.ErrInvalidTransition", err)
		}
		r.failJob("it broke")
		if err := r.s.JobRedrive(r.ctx, dynamo.RedriveJobParams{ID: r.job, Count: 1, Now: r.now}); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("redrive naming count 1 of a job redriven 0 times: %v; want sm.ErrInvalidTransition", err)
		}
		if err := r.s.JobRedrive(r.ctx, redrive); err != nil {
			t.Fatalf("redrive: %v", err)
		}
		j, err := r.s.JobGet(r.ctx, r.job)
		if err != nil || j.State != sm.JobRunning || j.Error != "" || !j.Ended.IsZero() || len(j.Redrives) != 1 || j.Redrives[0].Error != "it broke" {
			t.Fatalf("job after redrive: %s %q ended %v redrives %+v, %v; want RUNNING, no error or end, one redrive of \"it broke\"", j.State, j.Error, j.Ended, j.Redrives, err)
		}
		if n, err := r.s.JobRedriveCount(r.ctx, r.job); err != nil || n != 1 {
			t.Fatalf("redrive count: %d, %v; want 1", n, err)
		}
		if st, err := r.s.JobState(r.ctx, r.job); err != nil || st != sm.JobRunning {
			t.Fatalf("state copy after redrive: %s, %v; want RUNNING", st, err)
		}
		r.failJob("broke again")
		if err := r.s.JobRedrive(r.ctx, redrive); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("the same redrive repeated: %v; want sm.ErrInvalidTransition", err)
		}
		redrive.Count = 1
		if err := r.s.JobRedrive(r.ctx, redrive); err != nil {
			t.Fatalf("the next redrive: %v", err)
		}
	}},
	{"a stage is redriven only once its job runs again", func(t *testing.T, r *rig) {
		r.stage(1)
		r.stageEvent(sm.StageStart)
		r.stageEvent(sm.StageFail)
		r.failJob("stage failed")
		if err := r.s.StageRedrive(r.ctx, r.job, 0, sm.StageRedrive, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("redrive a stage of a FAILED job: %v; want sm.ErrInvalidTransition", err)
		}
		r.redriveJob(0)
		if err := r.s.StageRedrive(r.ctx, r.job, 0, sm.StageRedriveBlocked, r.now, time.Time{}); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("redrive a started stage back to BLOCKED: %v; want sm.ErrInvalidTransition", err)
		}
		if err := r.s.StageRedrive(r.ctx, r.job, 0, sm.StageRedrive, r.now, r.now); err != nil {
			t.Fatalf("redrive the stage: %v", err)
		}
		if st, err := r.s.StageGet(r.ctx, r.job, 0); err != nil || st.State != sm.StageRunning || st.Error != "" {
			t.Fatalf("stage after redrive: %s %q, %v; want RUNNING without an error", st.State, st.Error, err)
		}
		if err := r.s.StageRedrive(r.ctx, r.job, 0, sm.StageRedrive, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("redrive a running stage: %v; want sm.ErrInvalidTransition", err)
		}
	}},
	{"a redrive's marks hold only while the job is FAILED at the count before it", func(t *testing.T, r *rig) {
		refs := r.stage(3)
		failed, claimed, ready := refs[0], refs[1], refs[2]
		r.failTask(failed, r.claim(failed, "tok-f"))
		c := r.claim(claimed, "tok-c")
		if err := r.s.TaskMarkRedrive(r.ctx, failed, 2, 1); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("mark a task of a running job: %v; want sm.ErrInvalidTransition", err)
		}
		r.failJob("task failed")
		if err := r.s.TaskMarkRedrive(r.ctx, failed, 2, 2); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("mark for redrive 2 a job redriven 0 times: %v; want sm.ErrInvalidTransition", err)
		}
		for _, ref := range refs {
			if err := r.s.TaskMarkRedrive(r.ctx, ref, 5, 1); err != nil {
				t.Fatalf("mark %s for redrive 1: %v", ref, err)
			}
		}
		if got := r.task(failed); got.State != sm.TaskFailed || got.RedrivePending != 1 {
			t.Fatalf("marked FAILED task: %s pending %d; want FAILED pending 1", got.State, got.RedrivePending)
		}
		if got := r.task(claimed); got.State != sm.TaskClaimed || got.Token != "tok-c" || got.MaxAttempts != c.Attempt+5 || got.RedrivePending != 0 {
			t.Fatalf("marked CLAIMED task: %s token %q max %d pending %d; want its claim kept, max %d, no mark", got.State, got.Token, got.MaxAttempts, got.RedrivePending, c.Attempt+5)
		}
		if got := r.task(ready); got.State != sm.TaskReady || got.MaxAttempts != 5 {
			t.Fatalf("marked READY task: %s max %d; want READY max 5", got.State, got.MaxAttempts)
		}
		r.redriveJob(0)
		if err := r.s.TaskMarkRedrive(r.ctx, claimed, 9, 1); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("mark once the job was redriven: %v; want sm.ErrInvalidTransition", err)
		}
		if got := r.task(claimed); got.MaxAttempts != c.Attempt+5 {
			t.Fatalf("attempts after the refused mark: %d; want %d", got.MaxAttempts, c.Attempt+5)
		}
	}},
	{"a redrive puts a failed task back once per generation", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		a := r.claim(ref, "tok-a")
		r.failTask(ref, a)
		r.failJob("task failed")
		if err := r.s.TaskMarkRedrive(r.ctx, ref, 0, 1); err != nil {
			t.Fatalf("mark: %v", err)
		}
		r.redriveJob(0)
		nb := r.now.Add(time.Second)
		if err := r.s.TaskRedrive(r.ctx, ref, 2, 1, r.now, nb, r.now); err != nil {
			t.Fatalf("put back: %v", err)
		}
		got := r.task(ref)
		if got.State != sm.TaskReady || got.MaxAttempts != a.Attempt+2 || got.RedrivePending != 0 || !got.NotBefore.Equal(nb) {
			t.Fatalf("task put back: %s max %d pending %d not before %s; want READY max %d, no mark, not before %s", got.State, got.MaxAttempts, got.RedrivePending, got.NotBefore, a.Attempt+2, nb)
		}
		if err := r.s.TaskRedrive(r.ctx, ref, 2, 1, r.now, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("the same redrive's put-back again: %v; want sm.ErrInvalidTransition", err)
		}
		// What the task does next is the new generation's: its failure is
		// not the same redrive's to put back.
		b, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: ref, Token: "tok-b", Now: nb, Lease: lease, Grace: lease})
		if err != nil || b.Attempt != a.Attempt+1 {
			t.Fatalf("claim the task put back: attempt %d, %v; want %d", b.Attempt, err, a.Attempt+1)
		}
		r.failTask(ref, b)
		if err := r.s.TaskRedrive(r.ctx, ref, 2, 1, r.now, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("the same redrive's put-back of the new failure: %v; want sm.ErrInvalidTransition", err)
		}
		if got := r.task(ref); got.State != sm.TaskFailed {
			t.Fatalf("task after the refused put-back: %s; want FAILED", got.State)
		}
		if err := r.s.TaskRedrive(r.ctx, ref, 2, 2, r.now, r.now, r.now); err != nil {
			t.Fatalf("the next redrive's put-back: %v", err)
		}
		if got := r.task(ref); got.State != sm.TaskReady || got.MaxAttempts != b.Attempt+2 {
			t.Fatalf("task put back again: %s max %d; want READY max %d", got.State, got.MaxAttempts, b.Attempt+2)
		}
	}},
	{"a redrive puts back no committed task", func(t *testing.T, r *rig) {
		ref := r.stage(1)[0]
		a := r.claim(ref, "tok-a")
		if _, err := r.s.TaskCommit(r.ctx, r.commit(ref, "tok-a", a.Attempt)); err != nil {
			t.Fatalf("commit: %v", err)
		}
		if err := r.s.TaskRedrive(r.ctx, ref, 2, 1, r.now, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("put back a committed task: %v; want sm.ErrInvalidTransition", err)
		}
		if err := r.s.TaskRaiseAttempts(r.ctx, ref, 2, 1); err != nil {
			t.Fatalf("raise a committed task: %v; want nothing done, no error", err)
		}
		if got := r.task(ref); got.State != sm.TaskSucceeded || got.MaxAttempts != 3 {
			t.Fatalf("committed task after the redrive: %s max %d; want SUCCEEDED max 3", got.State, got.MaxAttempts)
		}
	}},
	{"a redrive raises a running task's attempts once", func(t *testing.T, r *rig) {
		refs := r.stage(2)
		ref, ready := refs[0], refs[1]
		a := r.claim(ref, "tok-a")
		for _, step := range []struct {
			budget, gen, want int
		}{
			{4, 1, a.Attempt + 4},
			{6, 1, a.Attempt + 4}, // the same redrive repeated
			{6, 2, a.Attempt + 6},
			{1, 2, a.Attempt + 6},
		} {
			if err := r.s.TaskRaiseAttempts(r.ctx, ref, step.budget, step.gen); err != nil {
				t.Fatalf("raise by %d for redrive %d: %v", step.budget, step.gen, err)
			}
			if got := r.task(ref); got.MaxAttempts != step.want || got.State != sm.TaskClaimed || got.Token != "tok-a" {
				t.Fatalf("after raise by %d for redrive %d: %s token %q max %d; want its claim kept, max %d", step.budget, step.gen, got.State, got.Token, got.MaxAttempts, step.want)
			}
		}
		// A task the redrive raised is the new generation's: the same
		// redrive does not put it back, the next one does.
		if err := r.s.TaskRaiseAttempts(r.ctx, ready, 4, 1); err != nil {
			t.Fatalf("raise a READY task: %v", err)
		}
		if err := r.s.TaskRedrive(r.ctx, ready, 2, 1, r.now, r.now, r.now); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("put back a task its redrive raised: %v; want sm.ErrInvalidTransition", err)
		}
		if got := r.task(ready); got.MaxAttempts != 4 {
			t.Fatalf("raised READY task after the refused put-back: max %d; want 4", got.MaxAttempts)
		}
		if err := r.s.TaskRedrive(r.ctx, ready, 2, 2, r.now, r.now, r.now); err != nil {
			t.Fatalf("the next redrive's put-back: %v", err)
		}
		if got := r.task(ready); got.State != sm.TaskReady || got.MaxAttempts != 2 {
			t.Fatalf("READY task put back by the next redrive: %s max %d; want READY max 2", got.State, got.MaxAttempts)
		}
	}},
}

// rig is one case's store and job.
type rig struct {
	t      *testing.T
	s      Store
	ctx    context.Context
	now    time.Time
	job    string
	shards int
}

func (r *rig) jobParams(owner, key string, variant int) dynamo.CreateJobParams {
	r.t.Helper()
	sp, err := spec.Parse(fmt.Appendf(nil, `{"name":"conformance-%d","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`, variant))
	if err != nil {
		r.t.Fatal(err)
	}
	return dynamo.CreateJobParams{
		Job:     domain.Job{ID: newJobID(), Owner: owner, Spec: sp, SpecHash: sp.Hash(), Created: r.now},
		IdemKey: key, IdemTTL: time.Hour, StageDue: r.now.Add(time.Hour),
	}
}

func (r *rig) create(owner, key string, variant int) string {
	r.t.Helper()
	p := r.jobParams(owner, key, variant)
	id, created, err := r.s.JobCreate(r.ctx, p)
	if err != nil || !created || id != p.Job.ID {
		r.t.Fatalf("create job: %s, created %v, %v; want %s created", id, created, err, p.Job.ID)
	}
	return id
}

// stage makes a job whose first stage is planned into n READY tasks with
// their counters, and returns the tasks.
func (r *rig) stage(n int) []domain.TaskRef {
	r.t.Helper()
	r.job = r.create(owner, "stage-"+randHex(4), 1)
	st, err := r.s.StageSetPlan(r.ctx, r.job, 0, n)
	if err != nil {
		r.t.Fatalf("plan stage: %v", err)
	}
	if st.Shards < 1 {
		r.t.Fatalf("plan stage: %d counter shards", st.Shards)
	}
	r.shards = st.Shards
	if err := r.s.ShardPut(r.ctx, r.job, 0, n, st.Shards); err != nil {
		r.t.Fatalf("put counters: %v", err)
	}
	var refs []domain.TaskRef
	var tasks []domain.Task
	for p := range n {
		ref := domain.TaskRef{Job: r.job, Stage: 0, Partition: p}
		refs = append(refs, ref)
		tasks = append(tasks, domain.Task{Ref: ref, State: sm.TaskReady, MaxAttempts: 3, Updated: r.now})
	}
	if err := r.s.TaskPutMany(r.ctx, tasks, time.Time{}); err != nil {
		r.t.Fatalf("put tasks: %v", err)
	}
	return refs
}

func (r *rig) claim(ref domain.TaskRef, token string) domain.Task {
	r.t.Helper()
	t, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: ref, Token: token, Now: r.now, Lease: lease, Grace: lease})
	if err != nil {
		r.t.Fatalf("claim %s: %v", ref, err)
	}
	return t
}

func (r *rig) commit(ref domain.TaskRef, token string, attempt int) dynamo.CommitParams {
	return dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: token, Now: r.now},
		Attempt: attempt, Outputs: 1, Shards: r.shards}
}

// failTask fails the claim c of ref for good, as its holder does.
func (r *rig) failTask(ref domain.TaskRef, c domain.Task) {
	r.t.Helper()
	if _, err := r.s.TaskRelease(r.ctx, dynamo.ReleaseParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: c.Token, Now: r.now},
		Event: sm.TaskFailPermanent, Err: "task failed"}); err != nil {
		r.t.Fatalf("fail %s: %v", ref, err)
	}
}

func (r *rig) failJob(reason string) {
	r.t.Helper()
	if _, err := r.s.JobEndEvent(r.ctx, r.job, sm.JobFail, reason, "", r.now); err != nil {
		r.t.Fatalf("fail job: %v", err)
	}
}

// redriveJob redrives the FAILED job that count redrives came before.
func (r *rig) redriveJob(count int) {
	r.t.Helper()
	if err := r.s.JobRedrive(r.ctx, dynamo.RedriveJobParams{ID: r.job, Count: count, Now: r.now, FollowUp: r.now.Add(time.Minute)}); err != nil {
		r.t.Fatalf("redrive job: %v", err)
	}
}

func (r *rig) stageEvent(ev sm.Event) {
	r.t.Helper()
	if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: r.job, Stage: 0, Event: ev, Now: r.now}); err != nil {
		r.t.Fatalf("%s stage: %v", ev, err)
	}
}

func (r *rig) task(ref domain.TaskRef) domain.Task {
	r.t.Helper()
	t, err := r.s.TaskGet(r.ctx, ref)
	if err != nil {
		r.t.Fatalf("get task %s: %v", ref, err)
	}
	return t
}

func (r *rig) left(shard int) int {
	r.t.Helper()
	n, err := r.s.ShardLeft(r.ctx, r.job, 0, shard)
	if err != nil {
		r.t.Fatalf("read counter %d: %v", shard, err)
	}
	return n
}

// newJobID is a job id of control.NewJobID's form, which the routes check.
func newJobID() string {
	return fmt.Sprintf("j%011x%s", time.Now().UnixMilli(), randHex(5))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = crand.Read(b)
	return hex.EncodeToString(b)
}
