package integration

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// highWater counts a task function's runs in flight and the most at once.
type highWater struct{ running, peak atomic.Int32 }

// enter counts a run in; the returned func counts it out.
func (h *highWater) enter() func() {
	n := h.running.Add(1)
	for p := h.peak.Load(); n > p && !h.peak.CompareAndSwap(p, n); p = h.peak.Load() {
	}
	return func() { h.running.Add(-1) }
}

func (h *highWater) max() int { return int(h.peak.Load()) }

// registerMeasured registers a task function that counts itself in h and
// works long enough for other executor slots to try other tasks
// meanwhile (a work duration, not synchronisation).
func registerMeasured(reg *batchwork.Registry, name string, h *highWater) {
	reg.Register(name, func(ctx context.Context, tk *batchwork.Task) error {
		defer h.enter()()
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := fmt.Fprintf(tk.Out, "%s/%s/%d\n", tk.Job, tk.Stage, tk.Partition)
		return err
	})
}

// assertPeak checks that a limit held and was used.
func assertPeak(t *testing.T, what string, h *highWater, limit int) {
	t.Helper()
	if p := h.max(); p > limit {
		t.Errorf("%s: %d tasks ran at once, limit %d", what, p, limit)
	} else if p < limit {
		t.Errorf("%s: at most %d tasks ran at once; the limit %d should be used", what, p, limit)
	}
}

// assertNoSlotsHeld checks that a slot map is empty once its tasks ended.
func assertNoSlotsHeld(t *testing.T, e *env, m dynamo.SlotMap) {
	t.Helper()
	holders, err := e.r.Store.SlotHolders(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	if len(holders) != 0 {
		t.Errorf("slots of %s still held after its tasks ended: %v", m, holders)
	}
}

// maxConcurrency 2 on an executor with 8 slots: never more than 2 of the
// job's 10 tasks run at once, both slots are used, and the job completes
// with every task committed on its first attempt (a task over the limit
// waits; it never spends an attempt).
func TestMaxConcurrencyLimitsRunningTasks(t *testing.T) {
	t.Parallel()
	const tasks, limit = 10, 2
	var h highWater
	reg := batchwork.NewRegistry()
	registerMeasured(reg, "work", &h)
	e := newEnv(t, reg, envOptions{slots: 8})
	id := e.submit("limit", fmt.Appendf(nil, `{"name":"limit","maxConcurrency":%d,"stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, limit, tasks))
	st := e.waitJob(id, 2*time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	assertPeak(t, "job", &h, limit)
	assertCommittedOnce(t, e, id, 0, tasks, 1)
	assertNoSlotsHeld(t, e, dynamo.JobSlots(id))
}

// Slots whose holders died are freed, on the injected clock: by the sweep
// when it expires the holder's lease, and by a refused claim when the
// holder never claimed (its executor died between slot and claim). A
// duplicate delivery of a running task neither takes a second slot nor
// frees the one its task holds.
func TestConcurrencySlotsOfDeadHoldersAreFreed(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	store := rig.e.r.Store
	id := submitTo(t, rig.svc, "slots", `{"name":"slots","maxConcurrency":1,"lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":3}}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	holders := func() []domain.TaskRef {
		t.Helper()
		h, err := store.SlotHolders(ctx, dynamo.JobSlots(id))
		if err != nil {
			t.Fatal(err)
		}
		return dynamo.OldestHolders(h, len(h))
	}
	overLimit := func(p int) {
		t.Helper()
		_, err := rig.svc.Claim(ctx, ref(p))
		if !errors.Is(err, control.ErrOverLimit) || !errors.Is(err, domain.ErrAlreadyDone) {
			t.Fatalf("claim of task %d: %v, want ErrOverLimit (wrapping ErrAlreadyDone)", p, err)
		}
		if tk := stageTasks(t, rig.e, id, 0)[p]; tk.State != sm.TaskReady || tk.Attempt != 0 {
			t.Fatalf("task %d after a refused claim: %s attempt %d, want READY with no attempt spent", p, tk.State, tk.Attempt)
		}
	}

	// Task 0 is claimed and its executor dies: no heartbeat, no commit.
	if _, err := rig.svc.Claim(ctx, ref(0)); err != nil {
		t.Fatalf("claim task 0: %v", err)
	}
	overLimit(1)
	// A duplicate delivery of task 0 finds its claim held; its slot stays.
	var held *domain.ClaimHeldError
	if _, err := rig.svc.Claim(ctx, ref(0)); !errors.As(err, &held) {
		t.Fatalf("duplicate claim of task 0: %v, want ClaimHeldError", err)
	}
	if h := holders(); len(h) != 1 || h[0] != ref(0) {
		t.Fatalf("slots after a duplicate delivery: %v, want [task 0]", h)
	}

	// The sweep expires task 0's lease and frees its slot.
	rig.clk.Advance(2*10*time.Second + time.Second) // past the lease and its grace: when the sweep looks
	if c := mustSweep(t, rig.svc); c.Expired != 1 {
		t.Fatalf("sweep: %+v, want one expired lease", c)
	}
	if h := holders(); len(h) != 0 {
		t.Fatalf("slots after the sweep expired the holder: %v, want none", h)
	}

	// An executor takes a slot for task 1 and dies before claiming.
	if out, _, err := store.SlotAcquire(ctx, dynamo.JobSlots(id), ref(1), 1, rig.clk.Now()); err != nil || out != dynamo.SlotTaken {
		t.Fatalf("acquire for task 1: %v, %v", out, err)
	}
	overLimit(2)
	rig.clk.Advance(31 * time.Second) // past the claim window
	c, err := rig.svc.Claim(ctx, ref(2))
	if err != nil {
		t.Fatalf("claim of task 2 after task 1's slot went stale: %v", err)
	}
	if c.Task.Attempt != 1 {
		t.Errorf("task 2 claimed at attempt %d, want 1", c.Task.Attempt)
	}
	if h := holders(); len(h) != 1 || h[0] != ref(2) {
		t.Fatalf("slots: %v, want [task 2]", h)
	}
}
