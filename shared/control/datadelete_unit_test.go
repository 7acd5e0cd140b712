package control

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// DeleteData: only the owner, only an ended job; every object of the job
// goes and no other job's; the job records it first, so its outputs
// answer ErrDataDeleted even when the deletion itself failed, and a retry
// finishes it keeping the first time.
func TestDeleteData(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// end brings the job to the state under test.
		end       func(r *unitRig, id string)
		owner     string
		failFirst bool // the first DeletePrefix fails
		wantErr   error
		wantState sm.JobState
	}{
		{name: "succeeded", end: finishUnitJob, owner: "tester", wantState: sm.JobSucceeded},
		{name: "cancelled", end: endUnitJob(sm.JobCancel), owner: "tester", wantState: sm.JobCancelled},
		{name: "failed", end: endUnitJob(sm.JobFail), owner: "tester", wantState: sm.JobFailed},
		{name: "another owner's", end: finishUnitJob, owner: "mallory", wantErr: domain.ErrNotFound},
		{name: "running", end: func(*unitRig, string) {}, owner: "tester", wantErr: ErrJobRunning},
		{name: "deletion failed, then retried", end: finishUnitJob, owner: "tester", failFirst: true, wantState: sm.JobSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			id, other := r.submit(oneStage(2, 3, "")), r.submit(oneStage(1, 3, ""))
			finishUnitJob(r, other)
			c.end(r, id)
			// Outputs of the job however it ended, and a plan, as S3 holds them.
			r.blob.Put(testdouble.DefaultBucket, blob.PlanKey(id, "s"), []byte("{}"))
			r.blob.Put(testdouble.DefaultBucket, blob.OutputKey(id, "s", 1, 1, 0), []byte("x"))
			before, otherKeys := r.blob.Keys(blob.JobPrefix(id)), r.blob.Keys(blob.JobPrefix(other))
			if c.failFirst {
				calls := 0
				r.blob.SetFault(func(m string) error {
					if m == "DeletePrefix" {
						if calls++; calls == 1 {
							return testdouble.ErrInjected
						}
					}
					return nil
				})
			}
			at := r.clock.Now()
			d, err := r.svc.DeleteData(r.ctx, c.owner, id)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("DeleteData: %v, want %v", err, c.wantErr)
				}
				if got := r.blob.Keys(blob.JobPrefix(id)); !slices.Equal(got, before) {
					t.Errorf("objects %v after a refused deletion, were %v", got, before)
				}
				if !r.job(id).DataDeleted.IsZero() {
					t.Errorf("a refused deletion was recorded")
				}
				return
			}
			if c.failFirst {
				if !errors.Is(err, testdouble.ErrInjected) {
					t.Fatalf("DeleteData with S3 failing: %v, want the injected fault", err)
				}
				// Recorded before any object went: the outputs say so.
				var dd *DataDeletedError
				if _, err := r.svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: id}); !errors.As(err, &dd) || !dd.At.Equal(at) {
					t.Fatalf("outputs after a failed deletion: %v, want a *DataDeletedError at %s", err, at)
				}
				r.clock.Advance(time.Minute)
				d, err = r.svc.DeleteData(r.ctx, c.owner, id)
			}
			if err != nil {
				t.Fatalf("DeleteData: %v", err)
			}
			want := DataDeletion{Job: id, State: string(c.wantState), DataDeleted: at, Deleted: len(before), Complete: true}
			if d != want {
				t.Errorf("DeleteData = %+v, want %+v", d, want)
			}
			if got := r.blob.Keys(blob.JobPrefix(id)); len(got) != 0 {
				t.Errorf("objects left: %v", got)
			}
			if got := r.blob.Keys(blob.JobPrefix(other)); !slices.Equal(got, otherKeys) {
				t.Errorf("the other job's objects: %v, were %v", got, otherKeys)
			}
			if _, err := r.svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: id, Stage: "s"}); !errors.Is(err, ErrDataDeleted) {
				t.Errorf("outputs after the deletion: %v, want ErrDataDeleted", err)
			}
			if j := r.job(id); !j.DataDeleted.Equal(at) || j.State != c.wantState {
				t.Errorf("job after the deletion: %s, data deleted at %s; want %s, %s", j.State, j.DataDeleted, c.wantState, at)
			}
			// Repeating it changes nothing, and keeps the first time.
			r.clock.Advance(time.Hour)
			again, err := r.svc.DeleteData(r.ctx, c.owner, id)
			want.Deleted = 0
			if err != nil || again != want {
				t.Errorf("repeated: %+v, %v; want %+v", again, err, want)
			}
		})
	}
}

// finishUnitJob runs a oneStage job's tasks to success.
func finishUnitJob(r *unitRig, id string) {
	r.t.Helper()
	for p := 0; p < r.stage(id, 0).Total; p++ {
		r.commit(r.claim(taskRef(id, 0, p)), 1)
	}
	if st := r.job(id).State; st != sm.JobSucceeded {
		r.t.Fatalf("job %s is %s, want SUCCEEDED", id, st)
	}
}

// endUnitJob ends a running job with ev, as a cancel or a failure does.
func endUnitJob(ev sm.Event) func(r *unitRig, id string) {
	return func(r *unitRig, id string) {
		r.t.Helper()
		if err := r.store.EndJob(r.ctx, id, ev, "ended by the test", "", r.clock.Now()); err != nil {
			r.t.Fatal(err)
		}
	}
}
