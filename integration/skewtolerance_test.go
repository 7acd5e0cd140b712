package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// Review: a combinable skewed stage's partition tasks may not be copied
// (tasks.copyable), but Copies.Speculate drops them only after it cut its
// stragglers to the copies' cap (launch := stragglers[:MaxCopies-running],
// longest-running first). A straggling partition task, claimed before the
// pieces (the partitions are queued first), takes the one place and is
// skipped: the straggling piece behind it gets no copy, sweep after
// sweep, for as long as the partition task runs.
func TestSkewStragglingPieceGetsACopy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newSweepRig(t, testTimings)
	job := submitTo(t, r.svc, "skewspec", `{"name":"skewspec","lease":"10m","stages":[`+
		`{"name":"map","task":"work","partitions":{"count":4},"shuffle":{"partitions":4}},`+
		`{"name":"reduce","task":"work","after":["map"],"skew":{"combinable":true,"threshold":2,"minBytes":1},`+
		`"speculation":{"quantile":0.5,"multiplier":1.5,"maxCopies":1}}]}`)
	commitSkewedMaps(t, r, job)
	st, err := r.e.r.Store.StageGet(ctx, job, 1)
	if err != nil || st.Total != 8 {
		t.Fatalf("reduce stage: %+v, %v; want 8 tasks (4 pieces of partition 1)", st, err)
	}
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: job, Stage: 1, Partition: p} }
	mustClaim(t, r.svc, ref(0)) // a partition task, claimed first
	r.clk.Advance(time.Second)
	var fast []control.Claim
	for _, p := range []int{2, 3, 4, 5} {
		fast = append(fast, mustClaim(t, r.svc, ref(p)))
	}
	mustClaim(t, r.svc, ref(6)) // a piece, claimed after partition 0
	mustClaim(t, r.svc, ref(7))
	r.clk.Advance(10 * time.Second)
	for _, c := range fast {
		putOutput(t, r.e, c, "k\t1\n")
		if err := r.svc.Commit(ctx, c, control.CommitResult{Outputs: 1}); err != nil {
			t.Fatal(err)
		}
	}
	launched := 0
	for range 3 {
		r.clk.Advance(30 * time.Second)
		launched += mustSweep(t, r.svc).Speculated
	}
	piece, err := r.e.r.Store.TaskGet(ctx, ref(6))
	if err != nil {
		t.Fatal(err)
	}
	if launched == 0 || piece.Copy == nil {
		t.Errorf("the pieces ran 100 s beside a median of 10 s and got no copy (%d launched): partition 0, claimed before them, holds the only place and is skipped", launched)
	}
}

// commitSkewedMaps commits the 4 map tasks of stage 0 of job, each with
// an indexed shuffle object whose partition 1 is hot.
func commitSkewedMaps(t *testing.T, r *sweepRig, job string) {
	t.Helper()
	ctx := context.Background()
	for m := range 4 {
		c := mustClaim(t, r.svc, domain.TaskRef{Job: job, Partition: m})
		parts := make([][]byte, 4)
		for p, n := range []int{2, 100, 2, 3} { // partition 1 hot
			for range n {
				parts[p] = append(parts[p], fmt.Sprintf("k%d\t1\n", p)...)
			}
		}
		body, size := blob.ShuffleBody(parts)
		raw := make([]byte, size)
		if _, err := body.ReadAt(raw, 0); err != nil {
			t.Fatal(err)
		}
		if err := r.e.r.Blob.PutIfAbsent(ctx, blob.OutputKey(job, "map", m, c.Task.Attempt, 0), raw); err != nil {
			t.Fatal(err)
		}
		if err := r.svc.Commit(ctx, c, control.CommitResult{Outputs: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// Review: an input stage's plan charges the tasks it adds to its owner's
// tasks quota (stages.chargePlan: a plan past the quota fails the job
// with the quota's error), but a skewed stage's pieces, up to
// skew.MaxPieces extra tasks per hot partition, are never charged:
// skewTotal raises the stage's total past what submit counted
// (admission.declaredTasks: the shuffle's partitions), and the job runs
// more tasks than its owner's quota allows, uncounted.
func TestSkewPiecesChargedToTheTasksQuota(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testTimings
	cfg.Quotas = control.Quotas{Tasks: control.OwnerLimits{Default: 10}}
	r := newSweepRig(t, cfg)
	job := submitTo(t, r.svc, "skewquota", `{"name":"skewquota","lease":"10m","stages":[`+
		`{"name":"map","task":"work","partitions":{"count":4},"shuffle":{"partitions":4}},`+
		`{"name":"reduce","task":"work","after":["map"],"skew":{"combinable":true,"threshold":2,"minBytes":1}}]}`) // 8 tasks of 10
	commitSkewedMaps(t, r, job)
	st, err := r.e.r.Store.StageGet(ctx, job, 1)
	if err != nil {
		t.Fatal(err)
	}
	use, err := r.e.r.Store.OwnerQuotaUse(ctx, "tester")
	if err != nil {
		t.Fatal(err)
	}
	js := jobState(t, r.svc, job)
	if js.State == "RUNNING" && 4+st.Total > 10 {
		t.Errorf("job RUNNING with %d tasks (reduce: %d, pieces included) under a tasks quota of 10; its owner is charged %d", 4+st.Total, st.Total, use.Tasks)
	}
}
