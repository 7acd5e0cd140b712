package storetest

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The owner's task-level cancel (sm.TaskOwnerCancel, dynamo TaskCancel).
func init() { cases = append(cases, taskCancelCases...) }

var taskCancelCases = []struct {
	name string
	run  func(t *testing.T, r *rig)
}{
	{"an owner's cancel fails a running or waiting task once and fences its holder", func(t *testing.T, r *rig) {
		refs := r.stage(3)
		running, waiting, done := refs[0], refs[1], refs[2]
		a := r.claim(running, "tok-a")
		c := r.claim(done, "tok-c")
		if _, err := r.s.TaskCommit(r.ctx, r.commit(done, "tok-c", c.Attempt)); err != nil {
			t.Fatalf("commit: %v", err)
		}
		left := r.left(dynamo.ShardOf(running.Partition, r.shards))
		for _, ref := range []domain.TaskRef{running, waiting} {
			got, err := r.s.TaskCancel(r.ctx, r.cancelParams(ref, 0))
			if err != nil || got.State != sm.TaskFailed || got.ErrorClass != domain.ClassCancelled || got.Tolerated || got.Token != "" {
				t.Fatalf("cancel %s: %s class %q tolerated %v token %q, %v; want FAILED, cancelled, untolerated, no token",
					ref, got.State, got.ErrorClass, got.Tolerated, got.Token, err)
			}
		}
		// The cancelled attempt can do nothing more with its claim.
		hp := dynamo.HolderParams{Ref: running, Token: "tok-a", Now: r.now}
		if err := r.s.TaskHeartbeat(r.ctx, hp, lease, lease); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("the cancelled holder's heartbeat: %v; want ErrStaleClaim", err)
		}
		if _, err := r.s.TaskCommit(r.ctx, r.commit(running, "tok-a", a.Attempt)); !errors.Is(err, domain.ErrStaleClaim) && !errors.Is(err, domain.ErrAlreadyDone) {
			t.Fatalf("the cancelled holder's commit: %v; want ErrStaleClaim or ErrAlreadyDone", err)
		}
		if _, err := r.s.TaskRelease(r.ctx, dynamo.ReleaseParams{HolderParams: hp, Event: sm.TaskFailPermanent, Err: "late"}); !errors.Is(err, domain.ErrStaleClaim) {
			t.Fatalf("the cancelled holder's failure: %v; want ErrStaleClaim", err)
		}
		// The waiting task's message is dropped when it arrives.
		if _, err := r.s.TaskClaim(r.ctx, dynamo.ClaimParams{Ref: waiting, Token: "tok-b", Now: r.now, Lease: lease, Grace: lease}); !errors.Is(err, domain.ErrAlreadyDone) {
			t.Fatalf("claim of the cancelled waiting task: %v; want ErrAlreadyDone", err)
		}
		// A repeat (a retry after a lost answer, the owner's second
		// cancel) answers the same task and counts nothing.
		first := r.task(running)
		again, err := r.s.TaskCancel(r.ctx, r.cancelParams(running, 0))
		if err != nil || again.State != first.State || again.LastError != first.LastError || !again.Updated.Equal(first.Updated) {
			t.Fatalf("cancel again: %s %q at %v, %v; want the first cancel's %s %q at %v", again.State, again.LastError, again.Updated, err,
				first.State, first.LastError, first.Updated)
		}
		if got := r.left(dynamo.ShardOf(running.Partition, r.shards)); got != left {
			t.Fatalf("counter left %d after untolerated cancels, want %d", got, left)
		}
		// A task that committed first is not cancelled.
		if _, err := r.s.TaskCancel(r.ctx, r.cancelParams(done, 0)); !errors.Is(err, domain.ErrAlreadyDone) {
			t.Fatalf("cancel of a committed task: %v; want ErrAlreadyDone", err)
		}
		if got := r.task(done); got.State != sm.TaskSucceeded {
			t.Fatalf("committed task after a cancel: %s", got.State)
		}
	}},
	{"a cancel within its stage's allowance counts the task finished once", func(t *testing.T, r *rig) {
		refs := r.stage(2)
		r.stageEvent(sm.StageStart)
		shard := dynamo.ShardOf(refs[0].Partition, r.shards)
		left := r.left(shard)
		got, err := r.s.TaskCancel(r.ctx, r.cancelParams(refs[0], 1))
		if err != nil || got.State != sm.TaskFailed || !got.Tolerated {
			t.Fatalf("tolerated cancel: %s tolerated %v, %v; want FAILED, tolerated", got.State, got.Tolerated, err)
		}
		if _, err := r.s.TaskCancel(r.ctx, r.cancelParams(refs[0], 1)); err != nil {
			t.Fatalf("the tolerated cancel again: %v", err)
		}
		if n := r.left(shard); n != left-1 {
			t.Fatalf("counter left %d, want %d: the tolerated task counts once", n, left-1)
		}
		if _, err := r.s.TaskCancel(r.ctx, r.cancelParams(refs[1], 1)); !errors.Is(err, dynamo.ErrNotTolerated) {
			t.Fatalf("cancel past the allowance: %v; want ErrNotTolerated", err)
		}
		if got := r.task(refs[1]); got.State != sm.TaskReady {
			t.Fatalf("task refused by the allowance is %s, want READY (untouched)", got.State)
		}
		st, err := r.s.StageGet(r.ctx, r.job, 0)
		if err != nil || st.Tolerated != 1 {
			t.Fatalf("stage tolerated %d, %v; want 1", st.Tolerated, err)
		}
	}},
}

// cancelParams cancels ref as its owner does, within allowed failures
// of its stage (0: none).
func (r *rig) cancelParams(ref domain.TaskRef, allowed int) dynamo.TaskCancelParams {
	return dynamo.TaskCancelParams{Ref: ref, Now: r.now, Err: "task s/" + string(rune('0'+ref.Partition)) + " cancelled by " + owner,
		Due: r.now, Allowed: allowed, Shards: r.shards}
}
