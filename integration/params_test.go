package integration

import (
	"context"
	"time"

	"testing"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/google/go-cmp/cmp"
)

// A schedule's firing shows its scheduledDate in the resolved input
// prefix: each firing submits with its own slot (the scheduled time, not
// the time it fired, a catch-up's included) and the schedule's params,
// and the job's status shows the resolved prefix and every value.
func TestScheduleFiringParams(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	const owner = "params"
	body := `{"name":"daily","expression":"0 * * * *","overlap":"allow","catchUp":"fireOnce","params":{"region":"eu"},"spec":` +
		`{"name":"report","params":{"region":null},"stages":[{"name":"s","task":"t","partitions":` +
		`{"input":{"prefix":"inputs:logs/${params.region}/${params.scheduledDate}/","allowEmpty":true}}}]}}`
	ctx := context.Background()
	sc, err := r.svc.CreateSchedule(ctx, owner, []byte(body))
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	r.fire()
	r.at(time.Second)
	r.fire() // h0, on time
	// Down until past h0+1h's grace: h0+1h fires as a catch-up run, its
	// slot still h0+1h.
	r.at(time.Hour + 10*time.Minute)
	r.fireUntilCaughtUp()

	runs := r.runs(owner, sc.ID)
	if len(runs) != 2 {
		t.Fatalf("runs %v, want h0's and a catch-up", r.runSummary(runs))
	}
	area := "s3://" + r.e.r.Blob.Bucket() + "/" + blob.InputsPrefix(principal.Key(owner))
	for _, run := range runs {
		slot := run.Scheduled.UTC()
		st, err := r.svc.Status(ctx, owner, run.JobID)
		if err != nil {
			t.Fatalf("status of %s: %v", run.JobID, err)
		}
		want := map[string]string{"region": "eu", "scheduledTime": slot.Format(time.RFC3339), "scheduledDate": slot.Format(time.DateOnly)}
		if d := cmp.Diff(want, st.Params); d != "" {
			t.Errorf("run at %s: params (-want +got):\n%s", slot, d)
		}
		if got, want := st.Stages[0].Input, area+"logs/eu/"+slot.Format(time.DateOnly)+"/"; got != want {
			t.Errorf("run at %s: input %q, want %q", slot, got, want)
		}
	}
	if !runs[0].CatchUp || !runs[0].Scheduled.Equal(r.h0.Add(time.Hour)) {
		t.Errorf("newest run %+v: want the catch-up for h0+1h", runs[0])
	}
}
