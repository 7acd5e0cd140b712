package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Review (session 8, R2) of rerun under retries and deletions.

// An idempotency key names one rerun request: the same job rerun from
// the same stage. A key reused for another job's rerun (or another
// --from) is a conflict, never a silent answer with the job the key made
// first, which would leave the second job not rerun at all. The exact
// retry still answers the first rerun without making a second.
func TestRerunIdempotencyKeyNamesOneRequest(t *testing.T) {
	t.Parallel()
	f, reg := newFixable()
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	f.reduceBroken.Store(true)
	a := e.submit("rerun-idem-a", []byte(fixableSpec))
	b := e.submit("rerun-idem-b", []byte(fixableSpec)) // the same spec, another job
	for _, id := range []string{a, b} {
		if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) {
			t.Fatalf("job %s %s (%s), want FAILED", id, st.State, st.Error)
		}
	}
	f.reduceBroken.Store(false)
	const key = "nightly-rerun"
	first, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: a, IdempotencyKey: key})
	if err != nil || !first.Created {
		t.Fatalf("rerun %s: %+v %v", a, first, err)
	}
	again, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: a, IdempotencyKey: key})
	if err != nil || again.Created || again.JobID != first.JobID {
		t.Fatalf("retried rerun of %s: %+v %v; want job %s, not created", a, again, err, first.JobID)
	}
	for _, tc := range []struct{ name, id, from string }{
		{"another job", b, ""},
		{"another from", a, "map"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: tc.id, From: tc.from, IdempotencyKey: key})
			if !errors.Is(err, domain.ErrIdempotencyConflict) {
				t.Fatalf("rerun of %s from %q under the key of %s's rerun: %+v, %v; want an idempotency conflict", tc.id, tc.from, a, res, err)
			}
		})
	}
}

// A rerun that reuses a stage which tolerated failed tasks reuses its
// missing partitions too: the rerun's status and job manifest must still
// count and list them, or the rerun "succeeds" clean while its outputs
// silently lack those partitions.
func TestRerunKeepsReusedStagesFailedPartitions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tolerantRegistry(), envOptions{})
	ctx := context.Background()
	orig := e.submit("rerun-tol", []byte(`{"name":"tol","stages":[
		{"name":"map","task":"tmap","partitions":{"count":4,"params":[{"fail":"no"},{"fail":"permanent"},{"fail":"no"},{"fail":"no"}]},
		 "toleratedFailures":{"count":1},"shuffle":{"partitions":2}},
		{"name":"reduce","task":"tcopy","after":["map"]}]}`))
	if st := e.waitJob(orig, time.Minute); st.State != string(sm.JobSucceeded) || st.FailedPartitions != 1 {
		t.Fatalf("job %s (%s) with %d failed partitions, want SUCCEEDED with 1", st.State, st.Error, st.FailedPartitions)
	}
	res, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "reduce"})
	if err != nil {
		t.Fatal(err)
	}
	st := e.waitJob(res.JobID, time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("rerun %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	if st.FailedPartitions != 1 || st.Stages[0].FailedTasks != 1 {
		t.Errorf("rerun status: %d failed partitions, map %d failed tasks; want 1 (the reused map's)", st.FailedPartitions, st.Stages[0].FailedTasks)
	}
	m, err := blob.ReadManifest(ctx, e.r.Blob, blob.JobManifestKey(res.JobID))
	if err != nil {
		t.Fatal(err)
	}
	if m.FailedTotal != 1 || len(m.Failed) != 1 || m.Failed[0].Stage != "map" || m.Failed[0].Partition != 1 {
		t.Errorf("rerun manifest lists failed partitions %+v (total %d), want map partition 1", m.Failed, m.FailedTotal)
	}
}

// With a retention, the bucket's lifecycle rule expires each object the
// retention after it was written, whoever reuses it. A rerun reusing a
// job's outputs that may expire before the rerun's deadline would read
// (and publish) objects that can vanish under it: it is refused with the
// time they expire, while a rerun that has the time is accepted.
func TestRerunRefusesOutputsExpiringBeforeItsDeadline(t *testing.T) {
	t.Parallel()
	const retention = time.Hour
	cfg := testTimings
	cfg.Retention = retention
	rig := newSweepRig(t, cfg)
	e, svc := rig.e, rig.svc
	ctx := context.Background()
	orig := submitTo(t, svc, "orig", `{"name":"exp","deadline":"10m","stages":[
		{"name":"a","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"b","task":"work","after":["a"]}]}`)
	work(t, e, rig.exec)
	wantSucceeded(t, svc, orig)
	if _, err := svc.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "b"}); err != nil {
		t.Fatalf("rerun while the reused outputs outlive its deadline: %v", err)
	}
	rig.clk.Advance(retention - 5*time.Minute) // the outputs expire in 5 minutes, the deadline is 10
	_, err := svc.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "b"})
	var re *control.RedriveError
	if !errors.As(err, &re) || re.Code != "outputs_expiring" {
		t.Fatalf("rerun reusing outputs that expire before its deadline: %v; want an outputs_expiring refusal", err)
	}
	// From the first stage it reuses nothing.
	if _, err := svc.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "a"}); err != nil {
		t.Fatalf("rerun reusing nothing: %v", err)
	}
}

// A rerun has its original's spec, output folder included. A folder that
// a job claimed (it published there, or failed publishing after its
// claim, which redrive answers with "rerun it") belongs to that job for
// good: the rerun would do all its work and then fail publishing. It is
// refused up front with an error naming the output and the job instead.
func TestRerunRefusesClaimedOutputFolder(t *testing.T) {
	t.Parallel()
	_, reg := newFixable()
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	spec := strings.Replace(fixableSpec, `{"name":"fixable",`, `{"name":"fixable","output":"outputs:review8-rerun/",`, 1)
	orig := e.submit("rerun-out", []byte(spec))
	if st := e.waitJob(orig, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	res, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "reduce"})
	if err == nil {
		st := e.waitJob(res.JobID, time.Minute)
		t.Fatalf("rerun of a job whose output folder it published was accepted; the rerun ended %s: %s", st.State, st.Error)
	}
	if !strings.Contains(err.Error(), "output") || !strings.Contains(err.Error(), orig) {
		t.Fatalf("rerun refused with %v; want an error naming the output folder and job %s", err, orig)
	}
}

// The refusal of a claimed output folder must not break the retry of a
// rerun request: the rerun the first try made may have published to the
// folder by the time the retry comes; the retry answers that job.
func TestRerunRetryAfterItPublished(t *testing.T) {
	t.Parallel()
	f, reg := newFixable()
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	f.reduceBroken.Store(true)
	spec := strings.Replace(fixableSpec, `{"name":"fixable",`, `{"name":"fixable","output":"outputs:review8-retry/",`, 1)
	orig := e.submit("rerun-retry", []byte(spec))
	if st := e.waitJob(orig, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s (%s), want FAILED", st.State, st.Error)
	}
	f.reduceBroken.Store(false)
	req := control.RerunRequest{Owner: "tester", ID: orig, IdempotencyKey: "retry-after-publish"}
	first, err := e.r.Service.Rerun(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if st := e.waitJob(first.JobID, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("rerun %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	again, err := e.r.Service.Rerun(ctx, req) // the client's retry of a lost answer
	if err != nil || again.JobID != first.JobID || again.Created {
		t.Fatalf("retried rerun: %+v, %v; want job %s, not created", again, err, first.JobID)
	}
}
