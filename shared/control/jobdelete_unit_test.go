package control

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// DeleteJob: only the owner, only an ended job; every record and object
// of the job goes and nothing of another job's; a deletion stopped after
// any step (a crash, a failed request) hides the job already and is
// finished by a repeat; a deleted job is not found, to its owner too.
func TestDeleteJob(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		end   func(r *unitRig, id string)
		owner string
		// stopAt makes the deletion fail after that step (DeleteStepHook),
		// or at that store method (a fault), once.
		stopAt, faultAt string
		wantErr         error
		wantState       sm.JobState
	}{
		{name: "succeeded", end: finishUnitJob, owner: "tester", wantState: sm.JobSucceeded},
		{name: "cancelled", end: endUnitJob(sm.JobCancel), owner: "tester", wantState: sm.JobCancelled},
		{name: "failed", end: endUnitJob(sm.JobFail), owner: "tester", wantState: sm.JobFailed},
		{name: "another owner's", end: finishUnitJob, owner: "mallory", wantErr: domain.ErrNotFound},
		{name: "running", end: func(*unitRig, string) {}, owner: "tester", wantErr: ErrJobRunning},
		{name: "stopped once marked", end: finishUnitJob, owner: "tester", stopAt: DeleteStepMarked, wantState: sm.JobSucceeded},
		{name: "stopped after the data", end: finishUnitJob, owner: "tester", stopAt: DeleteStepData, wantState: sm.JobSucceeded},
		{name: "stopped after the records", end: finishUnitJob, owner: "tester", stopAt: DeleteStepRecords, wantState: sm.JobSucceeded},
		{name: "objects failed", end: finishUnitJob, owner: "tester", faultAt: "DeletePrefix", wantState: sm.JobSucceeded},
		{name: "records failed", end: finishUnitJob, owner: "tester", faultAt: "JobDeleteRecords", wantState: sm.JobSucceeded},
		{name: "job item failed", end: finishUnitJob, owner: "tester", faultAt: "JobDeleteItem", wantState: sm.JobSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			id, other := r.submit(oneStage(3, 3, "")), r.submit(oneStage(1, 3, ""))
			finishUnitJob(r, other)
			c.end(r, id)
			r.blob.Put(testdouble.DefaultBucket, blob.PlanKey(id, "s"), []byte("{}"))
			r.blob.Put(testdouble.DefaultBucket, blob.OutputKey(id, "s", 1, 1, 0), []byte("x"))
			before, otherKeys := r.blob.Keys(blob.JobPrefix(id)), r.blob.Keys(blob.JobPrefix(other))
			records, otherRecords := r.store.JobRecords(id), r.store.JobRecords(other)
			if records < 6 {
				t.Fatalf("the job has %d records, want its job, idempotency, stage, counter and task records", records)
			}
			stopped := false
			if c.stopAt != "" {
				r.svc.DeleteStepHook = func(job, step string) error {
					if job == id && step == c.stopAt && !stopped {
						stopped = true
						return testdouble.ErrInjected
					}
					return nil
				}
			}
			if c.faultAt != "" {
				fault := func(m string) error {
					if m == c.faultAt && !stopped {
						stopped = true
						return testdouble.ErrInjected
					}
					return nil
				}
				if c.faultAt == "DeletePrefix" {
					r.blob.SetFault(fault)
				} else {
					r.store.SetFaults(fault, nil)
				}
			}
			d, err := r.svc.DeleteJob(r.ctx, c.owner, id)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("DeleteJob: %v, want %v", err, c.wantErr)
				}
				if got := r.blob.Keys(blob.JobPrefix(id)); !slices.Equal(got, before) {
					t.Errorf("objects %v after a refused deletion, were %v", got, before)
				}
				if n := r.store.JobRecords(id); n != records {
					t.Errorf("%d records after a refused deletion, were %d", n, records)
				}
				if !r.job(id).Deleting.IsZero() {
					t.Errorf("a refused deletion marked the job")
				}
				if _, err := r.svc.OwnedJob(r.ctx, "tester", id); err != nil {
					t.Errorf("status after a refused deletion: %v", err)
				}
				return
			}
			if c.stopAt != "" || c.faultAt != "" {
				if !errors.Is(err, testdouble.ErrInjected) {
					t.Fatalf("DeleteJob stopped at %s%s: %v, want the injected fault", c.stopAt, c.faultAt, err)
				}
				// Marked before anything went: the job is gone to every
				// route already, and to its owner's list.
				if _, err := r.svc.OwnedJob(r.ctx, "tester", id); !errors.Is(err, domain.ErrNotFound) {
					t.Errorf("status of a job half deleted: %v, want not found", err)
				}
				if _, err := r.svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: id}); !errors.Is(err, domain.ErrNotFound) {
					t.Errorf("outputs of a job half deleted: %v, want not found", err)
				}
				// Another owner still cannot finish (or learn of) it.
				if _, err := r.svc.DeleteJob(r.ctx, "mallory", id); !errors.Is(err, domain.ErrNotFound) {
					t.Errorf("another owner's repeat: %v, want not found", err)
				}
				var again JobDeletion
				again, err = r.svc.DeleteJob(r.ctx, c.owner, id)
				d.Objects += again.Objects
				d.Records += again.Records
				d.Complete = again.Complete
				d.Job, d.State = again.Job, again.State
			}
			if err != nil {
				t.Fatalf("DeleteJob: %v", err)
			}
			if d.Job != id || d.State != string(c.wantState) || !d.Complete || d.Objects != len(before) {
				t.Errorf("DeleteJob = %+v, want %s %s complete with %d objects", d, id, c.wantState, len(before))
			}
			// Every record the fake holds, and the owner's list entry the
			// fake keeps none of (a job without maxConcurrency has no slots).
			if c.stopAt == "" && c.faultAt == "" && d.Records != records+1 {
				t.Errorf("DeleteJob deleted %d records, want %d", d.Records, records+1)
			}
			if n := r.store.JobRecords(id); n != 0 {
				t.Errorf("%d records of the job left", n)
			}
			if got := r.blob.Keys(blob.JobPrefix(id)); len(got) != 0 {
				t.Errorf("objects left: %v", got)
			}
			if got := r.blob.Keys(blob.JobPrefix(other)); !slices.Equal(got, otherKeys) {
				t.Errorf("the other job's objects: %v, were %v", got, otherKeys)
			}
			if n := r.store.JobRecords(other); n != otherRecords {
				t.Errorf("the other job has %d records, had %d", n, otherRecords)
			}
			for _, owner := range []string{"tester", "mallory"} {
				if _, err := r.svc.DeleteJob(r.ctx, owner, id); !errors.Is(err, domain.ErrNotFound) {
					t.Errorf("DELETE by %s after the deletion: %v, want not found", owner, err)
				}
			}
			if _, err := r.svc.OwnedJob(r.ctx, "tester", id); !errors.Is(err, domain.ErrNotFound) {
				t.Errorf("status after the deletion: %v, want not found", err)
			}
		})
	}
}

// A claim trusts a RUNNING state it read for JobStateTTL, and the first
// claim of an unwritten task writes its record: the records of a job that
// ended moments ago are deleted only once every such claim has landed, so
// none outlives the deletion's pass.
func TestDeleteJobLetsClaimsSeeTheEnd(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		ttl      time.Duration
		after    time.Duration // from the job's end to the DELETE
		wantWait time.Duration
	}{
		{name: "at once", ttl: DefaultJobStateTTL, wantWait: DefaultJobStateTTL + operations.DeleteSettle},
		{name: "a second after", ttl: DefaultJobStateTTL, after: time.Second, wantWait: DefaultJobStateTTL + operations.DeleteSettle - time.Second},
		{name: "a longer TTL", ttl: 10 * time.Second, wantWait: 10*time.Second + operations.DeleteSettle},
		{name: "settled", ttl: DefaultJobStateTTL, after: DefaultJobStateTTL + operations.DeleteSettle},
		{name: "long ago", ttl: DefaultJobStateTTL, after: time.Hour},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.JobStateTTL = c.ttl })
			id := r.submit(oneStage(1, 3, ""))
			endUnitJob(sm.JobCancel)(r, id)
			ended := r.job(id).Ended
			r.clock.Advance(c.after)
			var recordsAt time.Time
			r.store.SetFaults(func(m string) error {
				if m == "JobDeleteRecords" && recordsAt.IsZero() {
					recordsAt = r.clock.Now()
				}
				return nil
			}, nil)
			if d, err := r.svc.DeleteJob(r.ctx, "tester", id); err != nil || !d.Complete {
				t.Fatalf("DeleteJob = %+v, %v", d, err)
			}
			if earliest := ended.Add(c.ttl + operations.DeleteSettle); recordsAt.Before(earliest) {
				t.Errorf("records deleted %v after the end, want at least %v", recordsAt.Sub(ended), c.ttl+operations.DeleteSettle)
			}
			var want []time.Duration
			if c.wantWait > 0 {
				want = []time.Duration{c.wantWait}
			}
			if !slices.Equal(r.slept, want) {
				t.Errorf("waited %v, want %v", r.slept, want)
			}
		})
	}
}

// A job with more records than one call's budget is deleted over calls,
// each answering Complete false until the last.
func TestDeleteJobOverCalls(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	id := r.submit(oneStage(3, 3, ""))
	finishUnitJob(r, id)
	budget := &budgetStore{Store: r.store, budget: 2}
	svc := New(unitTimings, budget, r.queue, r.blob, testLogger(t))
	svc.Now, svc.Sleep = r.clock.Now, r.sleep
	calls, total := 0, 0
	for ; calls < 10; calls++ {
		d, err := svc.DeleteJob(r.ctx, "tester", id)
		if err != nil {
			t.Fatalf("call %d: %v", calls+1, err)
		}
		total += d.Records
		if d.Complete {
			break
		}
	}
	if calls < 2 || r.store.JobRecords(id) != 0 {
		t.Errorf("deleted in %d calls, %d records left; want several calls and none left", calls+1, r.store.JobRecords(id))
	}
}

// budgetStore caps the budget DeleteJobRecords is given.
type budgetStore struct {
	*testdouble.Store
	budget int
}

func (b *budgetStore) JobDeleteRecords(ctx context.Context, job string, budget int) (int, bool, error) {
	return b.Store.JobDeleteRecords(ctx, job, min(budget, b.budget))
}

// With a retention, the sweep deletes an ended job's records once the
// retention has passed since it ended (its objects are the lifecycle
// rule's), and puts one whose retention is not over back in the index at
// its end; a job without a deadline gets the longest.
func TestExpireJob(t *testing.T) {
	t.Parallel()
	const retention = 10 * 24 * time.Hour
	cases := []struct {
		name      string
		after     time.Duration // from the job's end to the sweep
		retention time.Duration
		wantGone  bool
	}{
		{name: "retention over", after: retention, retention: retention, wantGone: true},
		{name: "retention not over", after: retention - time.Second, retention: retention},
		{name: "no retention", after: 100 * retention},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.Retention = c.retention })
			id := r.submit(oneStage(2, 3, ""))
			if got := r.job(id).Spec.Deadline; (c.retention > 0) != (got == spec.MaxDeadline) {
				t.Errorf("deadline %v with retention %v", got, c.retention)
			}
			finishUnitJob(r, id)
			ended := r.job(id).Ended
			r.clock.Advance(c.after)
			var counts SweepCounts
			if err := r.svc.sweeper.SweepItem(r.ctx, dynamo.DueItem{Kind: dynamo.DueJob, Job: id}, r.clock.Now(), &counts); err != nil {
				t.Fatal(err)
			}
			if gone := r.store.JobRecords(id) == 0; gone != c.wantGone {
				t.Fatalf("records gone %v, want %v", gone, c.wantGone)
			}
			if !c.wantGone && c.retention > 0 {
				due := r.store.DueOf(dynamo.DueItem{Kind: dynamo.DueJob, Job: id})
				if !due.Equal(ended.Add(c.retention)) {
					t.Errorf("due %s, want the end plus the retention %s", due, ended.Add(c.retention))
				}
			}
		})
	}
}
