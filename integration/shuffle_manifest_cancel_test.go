package integration

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A shuffle stage's manifest is written only for a stage that completed,
// and a stage completes only while its job runs: the last commit of a
// cancelled job's shuffle stage, landing after the cancel, writes none,
// and neither does the sweep that finishes the cancel.
func TestCancelledJobsShuffleStageHasNoManifest(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	id := submitTo(t, rig.svc, "cancel", `{"name":"cancel","stages":[
		{"name":"map","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"reduce","task":"work","after":["map"]}]}`)
	c0 := mustClaim(t, rig.svc, domain.TaskRef{Job: id, Partition: 0})
	c1 := mustClaim(t, rig.svc, domain.TaskRef{Job: id, Partition: 1})
	if err := rig.svc.Commit(ctx, c0, control.CommitResult{Outputs: 0}); err != nil {
		t.Fatal(err)
	}
	// The cancel's first write, and nothing after it.
	if err := e.r.Store.JobEnd(ctx, id, sm.JobCancel, "cancelled by tester", "", rig.clk.Now()); err != nil {
		t.Fatal(err)
	}
	_ = rig.svc.Commit(ctx, c1, control.CommitResult{Outputs: 0}) // a commit may land; what follows it must not
	key := blob.StageManifestKey(id, "map")
	if _, err := e.r.Blob.Get(ctx, key); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("shuffle manifest of a cancelled job's stage after its late last commit: %v, want not found", err)
	}
	rig.clk.Advance(time.Hour)
	mustSweep(t, rig.svc)
	if _, err := e.r.Blob.Get(ctx, key); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("shuffle manifest of a cancelled job's stage after the sweep: %v, want not found", err)
	}
	if st, err := e.r.Store.StageGet(ctx, id, 0); err != nil || st.State != sm.StageCancelled {
		t.Fatalf("shuffle stage %s, %v after the sweep; want CANCELLED", st.State, err)
	}
}

// diesAfterComplete is a store whose first completion of stage 0 applies
// and then fails, as when its process dies right after the write: the
// stage is COMPLETED and its follow-up (its manifest, its downstream
// start) was never done by its completer.
type diesAfterComplete struct {
	*dynamo.Store
	once sync.Once
}

func (d *diesAfterComplete) StageTransition(ctx context.Context, p dynamo.StageTransitionParams) error {
	err := d.Store.StageTransition(ctx, p)
	died := false
	if err == nil && p.Event == sm.StageComplete && p.Stage == 0 {
		d.once.Do(func() { died = true })
	}
	if died {
		return errors.New("process died after the stage's completion")
	}
	return err
}

// The shuffle manifest is written after its stage's guarded completion,
// and still no downstream stage starts without it: a completer that dies
// between the completion and the manifest leaves it to whoever starts the
// downstream stage (the other upstream's completer, or the sweep's look
// at the completed stage), which writes it first. The job succeeds, its
// reducers having read the manifest.
func TestShuffleManifestOfADeadCompleter(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e := rig.e
	svc := rig.service(&diesAfterComplete{Store: e.r.Store}, e.r.Queue)
	exec := rig.executor(svc)
	id := submitTo(t, svc, "dead", `{"name":"dead","stages":[
		{"name":"map","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"side","task":"work","partitions":{"count":1}},
		{"name":"join","task":"work","after":["map","side"]}]}`)
	for range 3 {
		work(t, e, exec)
		rig.clk.Advance(time.Minute)
		mustSweep(t, svc)
	}
	wantSucceeded(t, svc, id)
	if _, err := e.r.Blob.Get(context.Background(), blob.StageManifestKey(id, "map")); err != nil {
		t.Fatalf("shuffle manifest of the completed stage: %v", err)
	}
}
