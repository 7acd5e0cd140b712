package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// withOwnerLimits is the test timings plus owner limits.
func withOwnerLimits(l control.OwnerLimits) *control.Config {
	c := testTimings
	c.OwnerLimits = l
	return &c
}

// An owner limit of 2 on an executor with 8 slots spans the owner's jobs:
// of two jobs of 4 tasks each (no job limit), never more than 2 tasks run
// at once, both slots are used, and every task commits on its first
// attempt (over the limit is never an attempt). Another owner's job on the
// same executors is not held back: its 3 tasks must all run at once (each
// waits for the other two), which an owner limit of 2 would make
// impossible.
func TestOwnerLimitSpansTheOwnersJobs(t *testing.T) {
	t.Parallel()
	const limit, perJob, free = 2, 4, 3
	var limited highWater
	reg := batchwork.NewRegistry()
	registerMeasured(reg, "limited", &limited)
	var freeMu sync.Mutex
	freeRunning := 0
	allFree := make(chan struct{})
	reg.Register("free", func(ctx context.Context, tk *batchwork.Task) error {
		freeMu.Lock()
		if freeRunning++; freeRunning == free {
			close(allFree)
		}
		freeMu.Unlock()
		select {
		case <-allFree:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(30 * time.Second):
			return fmt.Errorf("the free owner's %d tasks never all ran at once", free)
		}
		_, err := fmt.Fprintf(tk.Out, "%s/%s/%d\n", tk.Job, tk.Stage, tk.Partition)
		return err
	})
	e := newEnv(t, reg, envOptions{slots: 8, control: withOwnerLimits(control.OwnerLimits{Owners: map[string]int{"alice": limit}})})
	spec := func(name, task string, n int) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":1},"stages":[{"name":"s","task":%q,"partitions":{"count":%d}}]}`, name, task, n)
	}
	a1 := e.submitAs("alice", "a1", spec("a1", "limited", perJob))
	a2 := e.submitAs("alice", "a2", spec("a2", "limited", perJob))
	b := e.submitAs("bob", "b", spec("b", "free", free))
	for _, j := range []struct{ owner, id string }{{"alice", a1}, {"alice", a2}, {"bob", b}} {
		if st := e.waitJobAs(j.owner, j.id, 2*time.Minute); st.State != string(sm.JobSucceeded) {
			t.Fatalf("%s's job %s: %s (%s), want SUCCEEDED", j.owner, j.id, st.State, st.Error)
		}
	}
	assertPeak(t, "owner alice", &limited, limit)
	assertCommittedOnce(t, e, a1, 0, perJob, 1)
	assertCommittedOnce(t, e, a2, 0, perJob, 1)
	assertCommittedOnce(t, e, b, 0, free, 1)
	assertNoSlotsHeld(t, e, dynamo.OwnerSlots("alice"))
	// An owner without a limit costs nothing: no slot item at all.
	if h, err := e.r.Store.SlotHolders(context.Background(), dynamo.OwnerSlots("bob")); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("bob (no limit) has a slot item: %v, %v", h, err)
	}
}

// With a job limit and an owner limit, the smaller binds: never more
// tasks at once than it, and it is used.
func TestJobAndOwnerLimitsTheSmallerBinds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		job, own  int
		wantLimit int
	}{
		{"job limit smaller", 2, 3, 2},
		{"owner limit smaller", 3, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			const tasks = 6
			var h highWater
			reg := batchwork.NewRegistry()
			registerMeasured(reg, "work", &h)
			e := newEnv(t, reg, envOptions{slots: 8, control: withOwnerLimits(control.OwnerLimits{Default: c.own})})
			id := e.submit("both", fmt.Appendf(nil, `{"name":"both","maxConcurrency":%d,"retry":{"maxAttempts":1},"stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, c.job, tasks))
			if st := e.waitJob(id, 2*time.Minute); st.State != string(sm.JobSucceeded) {
				t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
			}
			assertPeak(t, "job and owner", &h, c.wantLimit)
			assertCommittedOnce(t, e, id, 0, tasks, 1)
			assertNoSlotsHeld(t, e, dynamo.JobSlots(id))
			assertNoSlotsHeld(t, e, dynamo.OwnerSlots("tester"))
		})
	}
}

// The owner's slots, driven by hand on the injected clock, with an owner
// limit of 1 over three jobs: a claim over the owner's limit says so and
// gives back the job slot it took; a duplicate delivery reuses its
// task's owner slot; the sweep frees the slot of an expired lease; and a
// refused claim reaps the owner slots of holders in other jobs that died
// (before their claim, or with their lease expired and no sweep yet).
func TestOwnerSlotsOfDeadHoldersAreFreed(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, *withOwnerLimits(control.OwnerLimits{Owners: map[string]int{"tester": 1}}))
	ctx := context.Background()
	store := rig.e.r.Store
	owner := dynamo.OwnerSlots("tester")
	a := submitTo(t, rig.svc, "a", `{"name":"a","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`)
	b := submitTo(t, rig.svc, "b", `{"name":"b","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`)
	c := submitTo(t, rig.svc, "c", `{"name":"c","maxConcurrency":5,"lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`)
	ref := func(job string, p int) domain.TaskRef { return domain.TaskRef{Job: job, Stage: 0, Partition: p} }
	holders := func(m dynamo.SlotMap) []domain.TaskRef {
		t.Helper()
		h, err := store.SlotHolders(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		return dynamo.OldestHolders(h, len(h))
	}
	wantHolders := func(when string, m dynamo.SlotMap, want ...domain.TaskRef) {
		t.Helper()
		got := holders(m)
		if len(got) != len(want) || (len(want) == 1 && got[0] != want[0]) {
			t.Fatalf("%s slots %s: %v, want %v", m, when, got, want)
		}
	}
	overLimit := func(r domain.TaskRef) {
		t.Helper()
		_, err := rig.svc.Claim(ctx, r)
		var ol *control.OverLimitError
		if !errors.As(err, &ol) || !errors.Is(err, control.ErrOverLimit) || !errors.Is(err, domain.ErrAlreadyDone) {
			t.Fatalf("claim of %s: %v, want an OverLimitError (wrapping ErrOverLimit and ErrAlreadyDone)", r, err)
		}
		if ol.Limit != "owner" || ol.Name != "tester" || ol.Max != 1 {
			t.Fatalf("claim of %s refused by %+v, want the owner tester's limit of 1", r, *ol)
		}
		tk := stageTasks(t, rig.e, r.Job, r.Stage)[r.Partition]
		if tk.State != sm.TaskReady || tk.Attempt != 0 {
			t.Fatalf("%s after a refused claim: %s attempt %d, want READY with no attempt spent", r, tk.State, tk.Attempt)
		}
	}

	// The owner's slot item does not exist until its first claim creates it.
	if _, err := store.SlotHolders(ctx, owner); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("owner slots before any claim: %v, want none yet", err)
	}
	// a/0 is claimed and its executor dies: no heartbeat, no commit.
	if _, err := rig.svc.Claim(ctx, ref(a, 0)); err != nil {
		t.Fatalf("claim a/0: %v", err)
	}
	wantHolders("after the first claim", owner, ref(a, 0))
	overLimit(ref(b, 0))
	// c has a job limit with room: its claim takes c/0's job slot, then
	// finds the owner full and gives the job slot back.
	overLimit(ref(c, 0))
	wantHolders("after a claim refused by the owner's limit", dynamo.JobSlots(c))
	// Their status shows what they wait on: the owner's limit, in use.
	for _, tc := range []struct {
		job  string
		want []control.LimitUse
	}{
		{a, []control.LimitUse{{Kind: "owner", Max: 1, Running: 1}}},
		{b, []control.LimitUse{{Kind: "owner", Max: 1, Running: 1}}},
		{c, []control.LimitUse{{Kind: "job", Max: 5, Running: 0}, {Kind: "owner", Max: 1, Running: 1}}},
	} {
		st, err := rig.svc.Status(ctx, "tester", tc.job)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(st.Limits, tc.want) {
			t.Fatalf("status of %s: limits %+v, want %+v", tc.job, st.Limits, tc.want)
		}
	}
	// A duplicate delivery of a/0 finds its claim held; its slot stays.
	var held *domain.ClaimHeldError
	if _, err := rig.svc.Claim(ctx, ref(a, 0)); !errors.As(err, &held) {
		t.Fatalf("duplicate claim of a/0: %v, want ClaimHeldError", err)
	}
	wantHolders("after a duplicate delivery", owner, ref(a, 0))

	// The sweep expires a/0's lease and frees its owner slot.
	rig.clk.Advance(2*10*time.Second + time.Second) // past the lease and its grace
	if cnt := mustSweep(t, rig.svc); cnt.Expired != 1 {
		t.Fatalf("sweep: %+v, want one expired lease", cnt)
	}
	wantHolders("after the sweep expired the holder", owner)

	// An executor takes the owner slot for a/1 and dies before claiming:
	// b/0 waits until the claim window has passed, then reaps it.
	if out, _, err := store.SlotAcquire(ctx, owner, ref(a, 1), 1, rig.clk.Now()); err != nil || out != dynamo.SlotTaken {
		t.Fatalf("acquire for a/1: %v, %v", out, err)
	}
	overLimit(ref(b, 0))
	rig.clk.Advance(31 * time.Second) // past the claim window
	cb, err := rig.svc.Claim(ctx, ref(b, 0))
	if err != nil {
		t.Fatalf("claim of b/0 after a/1's slot went stale: %v", err)
	}
	if cb.Task.Attempt != 1 {
		t.Errorf("b/0 claimed at attempt %d, want 1", cb.Task.Attempt)
	}
	wantHolders("after b/0's claim", owner, ref(b, 0))

	// b/0's executor dies too; before any sweep, c/0's claim finds the
	// lease expired and reaps the slot.
	rig.clk.Advance(2*10*time.Second + time.Second)
	cc, err := rig.svc.Claim(ctx, ref(c, 0))
	if err != nil {
		t.Fatalf("claim of c/0 after b/0's lease expired: %v", err)
	}
	wantHolders("after c/0's claim", owner, ref(c, 0))
	wantHolders("after c/0's claim", dynamo.JobSlots(c), ref(c, 0))
	// c/0 commits: both its slots are freed.
	if err := rig.svc.Commit(ctx, cc, control.CommitResult{Outputs: 0}); err != nil {
		t.Fatalf("commit c/0: %v", err)
	}
	wantHolders("after c/0 committed", owner)
	wantHolders("after c/0 committed", dynamo.JobSlots(c))
}
