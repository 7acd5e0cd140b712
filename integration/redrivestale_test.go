package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An executor process that saw a job FAILED still trusts that for its
// job-state TTL; its owner's redrive, made by another process (the api
// function) within it, puts the job's tasks back. A claim of a redriven
// task there must not cancel it on the stale FAILED: the redrive is the
// very thing that made it claimable, and a task cancelled in a running
// job waits for the sweep's repair (minutes). A job the claim's re-read
// finds FAILED still refuses it.
func TestClaimAfterRedriveIsNotRefusedOnAStaleFailedState(t *testing.T) {
	t.Parallel()
	const counted = `{"count":2}`
	const fromInput = `{"input":{"prefix":"inputs:stale/"}}` // tasks written at materialization
	for _, tc := range []struct {
		name       string
		partitions string
		first      int   // the redriven task claimed first: its claim meets the stale state
		refused    error // the claim of the other task before the redrive
	}{
		{"unwritten tasks, the failed one first: the check before its claim", counted, 0, domain.ErrAlreadyDone},
		{"unwritten tasks, the never claimed one first: the check before its claim, which may write it", counted, 1, domain.ErrAlreadyDone},
		{"written tasks: the check after the claim", fromInput, 0, domain.ErrJobNotRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			claimAfterRedrive(t, tc.partitions, tc.first, tc.refused)
		})
	}
}

func claimAfterRedrive(t *testing.T, partitions string, first int, refused error) {
	reg := batchwork.NewRegistry()
	reg.Register("work", func(context.Context, *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	clk := newTestClock()
	// The executor's process: a TTL no test step can outlast.
	exec := newService(e, control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second, JobStateTTL: time.Hour},
		e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	api := newService(e, testTimings, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	ctx := context.Background()
	e.putInput("tester", "stale/a.txt", []byte("a\n"))
	e.putInput("tester", "stale/b.txt", []byte("b\n"))
	id := submitTo(t, api, "stale-failed", `{"name":"r","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"work","partitions":`+partitions+`}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }

	c0, err := exec.Claim(ctx, ref(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Fail(ctx, c0, control.FailParams{Cause: "bad data", Class: domain.ClassPermanent}); err != nil {
		t.Fatal(err)
	}
	// The executor's process reads the job FAILED and keeps it; its
	// claim of the other task is refused.
	if _, err := exec.Claim(ctx, ref(1)); !errors.Is(err, refused) {
		t.Fatalf("claim in the failed job: %v, want %v", err, refused)
	}
	if _, err := api.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(2 * time.Minute) // past the redrive's not-before (the job-state cache keeps real time)
	for _, p := range []int{first, 1 - first} {
		c, err := exec.Claim(ctx, ref(p))
		if err != nil {
			t.Fatalf("claim of redriven task %d: %v; want it claimed", p, err)
		}
		if err := exec.Commit(ctx, c, control.CommitResult{WrittenHere: true}); err != nil {
			t.Fatalf("commit of redriven task %d: %v", p, err)
		}
	}
	if st, err := api.Status(ctx, "tester", id); err != nil || st.State != string(sm.JobSucceeded) {
		t.Fatalf("job after the redriven tasks committed: %+v, %v; want SUCCEEDED", st.State, err)
	}
}

// A task claimed when its job is redriven keeps its claim (its budget
// raised, no not-before: the redrive's delay covers the others), so an
// expired lease lets another claim take it at once, in a process that may
// still trust the FAILED it saw (every process here trusts a state for an
// hour, the redrive's delay with it). That claim must not cancel the task.
func TestTakeoverAfterRedriveIsNotRefusedOnAStaleFailedState(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(context.Context, *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	clk := newTestClock()
	cfg := testTimings
	cfg.JobStateTTL = time.Hour
	exec := newService(e, cfg, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	api := newService(e, cfg, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
	ctx := context.Background()
	id := submitTo(t, api, "stale-takeover", `{"name":"r","retry":{"maxAttempts":2},"stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	held, err := exec.Claim(ctx, ref(1))
	if err != nil {
		t.Fatal(err)
	}
	c0, err := exec.Claim(ctx, ref(0))
	if err != nil {
		t.Fatal(err)
	}
	// This process fails the job, and keeps it FAILED.
	if _, err := exec.Fail(ctx, c0, control.FailParams{Cause: "bad data", Class: domain.ClassPermanent}); err != nil {
		t.Fatal(err)
	}
	if st, err := api.Status(ctx, "tester", id); err != nil || st.State != string(sm.JobFailed) {
		t.Fatalf("job after the permanent failure: %v, %v; want FAILED", st.State, err)
	}
	if _, err := api.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(held.Lease + 2*sm.LeaseSkew) // the holder's lease expired
	c, err := exec.Claim(ctx, ref(1))
	if err != nil {
		t.Fatalf("claim of the task held at the redrive, its lease expired: %v; want it claimed", err)
	}
	if c.Task.Attempt != 2 {
		t.Fatalf("claimed attempt %d, want 2", c.Task.Attempt)
	}
}
