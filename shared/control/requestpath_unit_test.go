package control

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// monoClock is a settable clock for the job-state cache (which runs on
// the real, monotonic clock, not Service.Now).
type monoClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *monoClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *monoClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func withMonoClock(r *unitRig) *monoClock {
	c := &monoClock{t: time.Unix(1_000_000, 0)}
	r.svc.SetJobStateClock(c.now)
	return c
}

// Claims read the job's state once per TTL per process, whatever their
// number: no per-claim read of the job (before: one consistent read of
// the spec-bearing job item per claim and per heartbeat).
func TestClaimsReadTheJobStateOncePerTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		ttl       time.Duration
		wantReads int
	}{
		{"default TTL", 0, 1},
		// Every claim and heartbeat; a claim that may write its task
		// (sm.TaskUnwritten) reads before the write too.
		{"no cache (as before: every claim and heartbeat)", -1, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(c *Config) { c.JobStateTTL = tc.ttl })
			withMonoClock(r)
			id := r.submit(oneStage(20, 1, ""))
			before := r.store.CallCount("JobState")
			for p := 0; p < 20; p++ {
				c := r.claim(taskRef(id, 0, p))
				if err := r.svc.Heartbeat(r.ctx, c); err != nil {
					t.Fatalf("heartbeat: %v", err)
				}
			}
			if got := r.store.CallCount("JobState") - before; got != tc.wantReads {
				t.Fatalf("20 claims and heartbeats read the job state %d times, want %d", got, tc.wantReads)
			}
		})
	}
}

// The bound the cache keeps: a job ended by another process is seen by
// this one's claims within the TTL; a job this process ended, at once.
// A claim that the stale state lets through is a claim of a RUNNING
// copy; the runner's job watch stops it (CheckJob).
func TestClaimSeesAnEndedJobWithinTheTTL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		here        bool // ended through this service (else: another process)
		after       time.Duration
		wantGranted bool
	}{
		{"another process, within the TTL", false, DefaultJobStateTTL / 2, true},
		{"another process, at the TTL", false, DefaultJobStateTTL, false},
		{"another process, long after", false, time.Hour, false},
		{"this process, at once", true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			clk := withMonoClock(r)
			id := r.submit(oneStage(2, 1, ""))
			r.claim(taskRef(id, 0, 0)) // caches RUNNING
			if tc.here {
				// As Cancel, failJob, finishJob and the deadline do.
				if err := r.svc.EndJob(r.ctx, id, sm.JobCancel, operations.CancelReason, "", r.clock.Now()); err != nil {
					t.Fatal(err)
				}
			} else if err := r.store.EndJob(r.ctx, id, sm.JobCancel, "by another process", "", r.clock.Now()); err != nil {
				t.Fatal(err)
			}
			clk.advance(tc.after)
			c, err := r.svc.Claim(r.ctx, taskRef(id, 0, 1))
			if tc.wantGranted {
				if err != nil {
					t.Fatalf("claim within the TTL: %v, want granted (the documented bound)", err)
				}
				if err := r.svc.CheckJob(r.ctx, c); err != nil {
					t.Fatalf("check within the TTL: %v", err)
				}
				clk.advance(DefaultJobStateTTL)
				if err := r.svc.CheckJob(r.ctx, c); !errors.Is(err, domain.ErrJobNotRunning) {
					t.Fatalf("check a TTL later: %v, want ErrJobNotRunning", err)
				}
				return
			}
			if !errors.Is(err, domain.ErrJobNotRunning) {
				t.Fatalf("claim: %v, want ErrJobNotRunning", err)
			}
			if st := r.task(taskRef(id, 0, 1)).State; st != sm.TaskCancelled {
				t.Fatalf("task %s, want CANCELLED by the refused claim", st)
			}
		})
	}
}

// The commit lists the attempt's outputs only when it has some and its
// caller did not just write them itself: a task without output costs no
// ListObjectsV2, the in-process runner's commit none either, and a
// remote executor's commit is still checked against S3.
func TestCommitListsOnlyWhatItMustCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		outputs   int
		write     bool // the outputs are in S3
		commit    func(r *unitRig, c Claim, n int) error
		wantLists int
		wantErr   error
	}{
		{"no outputs", 0, false, func(r *unitRig, c Claim, n int) error { return r.svc.Commit(r.ctx, c, CommitResult{Outputs: n}) }, 0, nil},
		{"outputs, checked", 2, true, func(r *unitRig, c Claim, n int) error { return r.svc.Commit(r.ctx, c, CommitResult{Outputs: n}) }, 1, nil},
		{"outputs missing, checked", 2, false, func(r *unitRig, c Claim, n int) error { return r.svc.Commit(r.ctx, c, CommitResult{Outputs: n}) }, 1, ErrOutputsMissing},
		{"written by the runner", 2, true, func(r *unitRig, c Claim, n int) error {
			return r.svc.Commit(r.ctx, c, CommitResult{WrittenHere: true, Outputs: n})
		}, 0, nil},
		{"remote executor, missing", 2, false, func(r *unitRig, c Claim, n int) error {
			req := RemoteCommitRequest{Outputs: n, Claim: RemoteClaim{
				Task: c.Task.Ref.String(), Token: c.Task.Token, Attempt: c.Task.Attempt, Lease: c.Lease}}
			rc, res, err := req.CommitArgs(r.ctx, r.svc.CachedSpec)
			if err != nil {
				return err
			}
			return r.svc.Commit(r.ctx, rc, res)
		}, 1, ErrOutputsMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			id := r.submit(oneStage(2, 1, ""))
			c := r.claim(taskRef(id, 0, 0))
			if tc.write {
				r.output(c, tc.outputs)
			}
			var mu sync.Mutex
			lists := 0
			r.blob.SetFault(func(method string) error {
				if method == "List" {
					mu.Lock()
					lists++
					mu.Unlock()
				}
				return nil
			})
			err := tc.commit(r, c, tc.outputs)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("commit: %v, want %v", err, tc.wantErr)
			}
			if lists != tc.wantLists {
				t.Fatalf("%d listings, want %d", lists, tc.wantLists)
			}
			want := sm.TaskSucceeded
			if tc.wantErr != nil {
				want = sm.TaskClaimed
			}
			if got := r.task(c.Task.Ref); got.State != want || (want == sm.TaskSucceeded && got.Outputs != tc.outputs) {
				t.Fatalf("task %s with %d outputs, want %s with %d", got.State, got.Outputs, want, tc.outputs)
			}
		})
	}
}
