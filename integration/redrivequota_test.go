package integration

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A redriven job runs again, so it counts in its owner's running-jobs
// quota again: an owner at its limit is refused a redrive as it would be
// a submission (429 "quota", nothing written), and gets it once a job of
// its own has ended.
func TestRedriveMeetsOwnerQuota(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("boom", func(ctx context.Context, tk *batchwork.Task) error { return errors.New("bad record") })
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error { <-ctx.Done(); return ctx.Err() })
	cfg := testTimings
	cfg.Quotas = control.Quotas{ActiveJobs: control.OwnerLimits{Default: 1}}
	e := newEnv(t, reg, envOptions{control: &cfg})
	ctx := context.Background()
	use := func() int {
		t.Helper()
		u, err := e.r.Store.OwnerQuotaUse(ctx, "tester")
		if err != nil {
			t.Fatal(err)
		}
		return u.ActiveJobs
	}

	failed := e.submit("rq-failed", []byte(`{"name":"f","stages":[{"name":"s","task":"boom","partitions":{"count":1},"retry":{"maxAttempts":1}}]}`))
	if st := e.waitJob(failed, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s, want FAILED", st.State)
	}
	if n := use(); n != 0 {
		t.Fatalf("%d active jobs counted after the only job failed, want 0", n)
	}
	running := e.submit("rq-running", []byte(`{"name":"r","stages":[{"name":"s","task":"hang","partitions":{"count":1}}]}`))
	if n := use(); n != 1 {
		t.Fatalf("%d active jobs counted, want 1", n)
	}

	// At the limit: refused, through the service and the API alike.
	_, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: failed})
	var qe *control.QuotaError
	if !errors.As(err, &qe) || qe.Quota != "active jobs" || qe.Max != 1 {
		t.Fatalf("redrive at the quota: %v, want the active jobs quota of 1", err)
	}
	resp := e.call("tester", http.MethodPost, "/jobs/"+failed+"/redrive", []byte(`{}`))
	if resp.Status != http.StatusTooManyRequests || resp.apiErr(t).Code != "quota" {
		t.Fatalf("POST redrive at the quota: %d %s, want 429 quota", resp.Status, resp.Body)
	}
	// Nothing written: the job is still FAILED, never redriven, and the
	// count is the running job's alone.
	if st, err := e.r.Service.Status(ctx, "tester", failed); err != nil || st.State != string(sm.JobFailed) || st.Redrives != 0 {
		t.Fatalf("refused job: %+v %v; want FAILED, 0 redrives", st, err)
	}
	if n := use(); n != 1 {
		t.Fatalf("%d active jobs counted after the refusals, want 1", n)
	}

	// The running job ends: the redrive is admitted and counted, and its
	// end counts it off again.
	if _, err := e.r.Service.Cancel(ctx, "tester", running); err != nil {
		t.Fatal(err)
	}
	st, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: failed})
	if err != nil || st.Redrives != 1 {
		t.Fatalf("redrive under the quota: %+v %v", st, err)
	}
	if st.State == string(sm.JobRunning) {
		if n := use(); n != 1 {
			t.Fatalf("%d active jobs counted while the redriven job runs, want 1", n)
		}
	}
	if st := e.waitJob(failed, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("redriven job %s, want FAILED again (its task is still broken)", st.State)
	}
	if n := use(); n != 0 {
		t.Fatalf("%d active jobs counted after every job ended, want 0", n)
	}
}
