package integration

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// With a retention, the sweep deletes every record of a job that ended
// the retention ago (its job item is in the sweep index at that time):
// job, stages, tasks, counters, attempt ends, timeline, state copies, its
// list entry and its idempotency record; its events were published and
// their outbox records are gone. A job that ended later is kept until its
// own turn, and a running job is never touched. (The objects under
// jobs/<id>/ are the bucket lifecycle rule's, which expires each the
// retention after it was written: infra TestRetention; the emulator runs
// no lifecycle rules.)
func TestSweepExpiresEndedJobs(t *testing.T) {
	t.Parallel()
	const retention = time.Hour
	cfg := testTimings
	cfg.Retention = retention
	rig := newSweepRig(t, cfg)
	e := rig.e
	ctx := context.Background()
	// Every process of an installation with a retention has it on its
	// store too (lambdaenv): the end of a job indexes it for the sweep.
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	store.JobSetRetention(retention)
	svc := rig.service(store, e.r.Queue)
	exec := rig.executor(svc)

	ok := submitTo(t, svc, "ok", `{"name":"ok","stages":[{"name":"a","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
	  {"name":"b","task":"work","after":["a"]}]}`)
	failed := submitTo(t, svc, "failed", `{"name":"failed","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"flaky","partitions":{"count":1}}]}`)
	work(t, e, exec)
	wantSucceeded(t, svc, ok)
	if st := jobState(t, svc, failed); st.State != string(sm.JobFailed) {
		t.Fatalf("job failed: %s, want FAILED", st.State)
	}
	if kinds := kindsOf(recordsOf(t, e, failed)); !slices.Contains(kinds, "ATT") || !slices.Contains(kinds, "EVT") {
		t.Fatalf("the failed job's records %v: want attempt ends and timeline events", kinds)
	}

	rig.clk.Advance(retention / 2)
	later := submitTo(t, svc, "later", oneStage("later", "work", 1))
	work(t, e, exec)
	wantSucceeded(t, svc, later)
	running := submitTo(t, svc, "running", oneStage("running", "work", 1)) // never run
	laterRecords, runningRecords := recordsOf(t, e, later), recordsOf(t, e, running)

	// Just short of the first two jobs' turn: nothing goes.
	rig.clk.Advance(retention/2 - time.Second)
	mustSweep(t, svc)
	for _, id := range []string{ok, failed} {
		if st := jobState(t, svc, id); st.State == "" {
			t.Fatalf("job %s expired before its retention ended", id)
		}
	}

	rig.clk.Advance(2 * time.Second)
	// As the sweep function: its role covers every call of the deletion
	// (iam_test.go).
	sweep := func() {
		if _, err := svc.Sweep(iamrec.WithFunction(ctx, iamrec.FnSweep)); err != nil {
			t.Fatalf("sweep: %v", err)
		}
	}
	expired := func(id string) bool {
		return len(recordsOf(t, e, id)) == 0
	}
	for i := 0; !expired(ok) || !expired(failed); i++ {
		if i == 5 {
			t.Fatalf("after %d sweeps, records left: %v and %v", i, recordsOf(t, e, ok), recordsOf(t, e, failed))
		}
		sweep()
	}
	for _, id := range []string{ok, failed} {
		if _, err := svc.Status(ctx, "tester", id); !errors.Is(err, domain.ErrNotFound) {
			t.Errorf("status of expired job %s: %v, want not found", id, err)
		}
	}
	for _, ev := range []string{events.SubmittedID(ok), events.EndedID(ok), events.StageCompletedID(ok, 0), events.StageCompletedID(ok, 1),
		events.SubmittedID(failed), events.EndedID(failed), events.TaskFailedID(failed, 0, 0, 1)} {
		if _, found, err := store.OutboxEvent(ctx, ev); err != nil || found {
			t.Errorf("event %s: outbox record found=%v, %v; want it published and deleted", ev, found, err)
		}
	}
	if got := recordsOf(t, e, later); !slices.Equal(got, laterRecords) {
		t.Errorf("a job whose retention is not over changed: %v, were %v", got, laterRecords)
	}
	if got := recordsOf(t, e, running); len(got) == 0 || jobState(t, svc, running).State != string(sm.JobRunning) {
		t.Errorf("the running job: records %v (were %v), state %s", got, runningRecords, jobState(t, svc, running).State)
	}

	// The later job's turn; the running job still stays.
	rig.clk.Advance(retention / 2)
	for i := 0; !expired(later); i++ {
		if i == 5 {
			t.Fatalf("after %d sweeps, records of the later job left: %v", i, recordsOf(t, e, later))
		}
		sweep()
	}
	if st := jobState(t, svc, running); st.State != string(sm.JobRunning) {
		t.Errorf("the running job is %s after the sweeps, want RUNNING", st.State)
	}
}
