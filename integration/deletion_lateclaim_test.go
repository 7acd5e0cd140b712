package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Only a RUNNING job has tasks to write: a duplicate message of a task
// arriving while its SUCCEEDED job is being deleted, after the deletion
// passed the task's stage, writes no record of the job. (A first claim
// wrote one for any job but a CANCELLED or FAILED one; the refusal after
// it turned it CANCELLED, and the deletion never came back to it.)
func TestLateClaimDuringDeletionWritesNoRecord(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	cfg := rig.cfg
	cfg.JobStateTTL = -1 // read the job's state at each check
	claimer := newService(rig.e, cfg, rig.e.r.Store, rig.e.r.Queue, rig.clk, rig.logs.logger())
	id := submitTo(t, rig.svc, "late", `{"name":"late","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	for p := range 2 {
		c := mustClaim(t, claimer, ref(p))
		if err := claimer.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatalf("commit %s: %v", ref(p), err)
		}
	}
	if got := jobState(t, rig.svc, id).State; got != string(sm.JobSucceeded) {
		t.Fatalf("job %s after every commit, want SUCCEEDED", got)
	}
	rig.clk.Advance(time.Minute) // past the deletion's settling wait
	// The deletion, one record at a time, until its pass over the stage
	// is done: the job's state still reads SUCCEEDED.
	store := rig.e.r.Store
	if err := store.JobMarkDeleting(ctx, id, "tester", rig.clk.Now()); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := store.StageGet(ctx, id, 0); errors.Is(err, domain.ErrNotFound) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if _, complete, err := store.JobDeleteRecords(ctx, id, 1); err != nil || complete {
			t.Fatalf("deletion before the stage item was gone: complete %v, %v", complete, err)
		}
	}
	if st, err := store.JobState(ctx, id); err != nil || st != sm.JobSucceeded {
		t.Fatalf("job state mid-deletion: %s, %v; want SUCCEEDED", st, err)
	}
	// A duplicate message of task 1 comes in.
	if _, err := claimer.Claim(ctx, ref(1)); err == nil {
		t.Fatal("claim of a task of a job being deleted was granted")
	}
	for done := false; !done; {
		d, err := rig.svc.DeleteJob(ctx, "tester", id)
		if err != nil {
			t.Fatal(err)
		}
		done = d.Complete
	}
	if _, err := store.TaskGet(ctx, ref(1)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("task 1 of the deleted job: %v, want no record", err)
	}
	if left := recordsOf(t, rig.e, id); len(left) != 0 {
		t.Fatalf("records of the deleted job left: %v", left)
	}
}
