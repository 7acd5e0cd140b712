package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The fake store's JobDeleter, as dynamo's: marking is guarded on the job
// having ended; records go children first, counted against the budget;
// the job item goes last, with the idempotency records naming it.
func (f *fakeStore) MarkJobDeleting(_ context.Context, id, owner string, now time.Time) error {
	_, err := fakeCall(f, "MarkJobDeleting", func() (struct{}, error) {
		j, ok := f.jobs[id]
		if !ok {
			return struct{}{}, fmt.Errorf("mark job %s deleting: %w", id, batch.ErrNotFound)
		}
		if !sm.Jobs.IsTerminal(j.job.State) {
			return struct{}{}, fmt.Errorf("mark job %s deleting: %w", id, sm.ErrInvalidTransition)
		}
		if j.job.Deleting.IsZero() {
			j.job.Deleting = msTime(now)
		}
		return struct{}{}, nil
	})
	return err
}

func (f *fakeStore) DeleteJobRecords(_ context.Context, job string, budget int) (int, bool, error) {
	type res struct {
		n        int
		complete bool
	}
	r, err := fakeCall(f, "DeleteJobRecords", func() (res, error) {
		n := 0
		full := func() bool { return budget > 0 && n >= budget }
		for k := range f.counters {
			if k.job == job && !full() {
				delete(f.counters, k)
				n++
			}
		}
		for k := range f.tasks {
			if k.Job == job && !full() {
				delete(f.tasks, k)
				n++
			}
		}
		for k := range f.ends {
			if k.ref.Job == job && !full() {
				delete(f.ends, k)
				n++
			}
		}
		for k := range f.slots {
			if k == dynamo.JobSlots(job) && !full() {
				delete(f.slots, k)
				n++
			}
		}
		if full() {
			return res{n, false}, nil
		}
		for k := range f.stages {
			if k.job == job {
				delete(f.stages, k)
				n++
			}
		}
		return res{n, true}, nil
	})
	return r.n, r.complete, err
}

// PostponeExpiry moves the job's turn; the fake keeps no TTL.
func (f *fakeStore) PostponeExpiry(_ context.Context, job, _ string, until time.Time) error {
	return fakeDo(f, "PostponeExpiry", func() error {
		j, ok := f.jobs[job]
		if !ok || !sm.Jobs.IsTerminal(j.job.State) || !j.job.Deleting.IsZero() {
			return fmt.Errorf("postpone expiry of job %s: %w", job, sm.ErrInvalidTransition)
		}
		j.due = msTime(until)
		return nil
	})
}

func (f *fakeStore) DeleteJobItem(_ context.Context, job string) (int, error) {
	return fakeCall(f, "DeleteJobItem", func() (int, error) {
		n := 0
		for k, v := range f.idem {
			if v.job == job {
				delete(f.idem, k)
				n++
			}
		}
		if _, ok := f.jobs[job]; ok {
			delete(f.jobs, job)
			n++
		}
		return n, nil
	})
}

// jobRecords counts what the fake store holds of a job.
func (f *fakeStore) jobRecords(job string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if _, ok := f.jobs[job]; ok {
		n++
	}
	for _, v := range f.idem {
		if v.job == job {
			n++
		}
	}
	for k := range f.stages {
		if k.job == job {
			n++
		}
	}
	for k := range f.counters {
		if k.job == job {
			n++
		}
	}
	for k := range f.tasks {
		if k.Job == job {
			n++
		}
	}
	for k := range f.ends {
		if k.ref.Job == job {
			n++
		}
	}
	return n
}

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
		{name: "another owner's", end: finishUnitJob, owner: "mallory", wantErr: batch.ErrNotFound},
		{name: "running", end: func(*unitRig, string) {}, owner: "tester", wantErr: ErrJobRunning},
		{name: "stopped once marked", end: finishUnitJob, owner: "tester", stopAt: DeleteStepMarked, wantState: sm.JobSucceeded},
		{name: "stopped after the data", end: finishUnitJob, owner: "tester", stopAt: DeleteStepData, wantState: sm.JobSucceeded},
		{name: "stopped after the records", end: finishUnitJob, owner: "tester", stopAt: DeleteStepRecords, wantState: sm.JobSucceeded},
		{name: "objects failed", end: finishUnitJob, owner: "tester", faultAt: "DeletePrefix", wantState: sm.JobSucceeded},
		{name: "records failed", end: finishUnitJob, owner: "tester", faultAt: "DeleteJobRecords", wantState: sm.JobSucceeded},
		{name: "job item failed", end: finishUnitJob, owner: "tester", faultAt: "DeleteJobItem", wantState: sm.JobSucceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			id, other := r.submit(oneStage(3, 3, "")), r.submit(oneStage(1, 3, ""))
			finishUnitJob(r, other)
			c.end(r, id)
			r.blob.put(fakeBucket, blob.PlanKey(id, "s"), []byte("{}"))
			r.blob.put(fakeBucket, blob.OutputKey(id, "s", 1, 1, 0), []byte("x"))
			before, otherKeys := r.blob.keysUnder(blob.JobPrefix(id)), r.blob.keysUnder(blob.JobPrefix(other))
			records, otherRecords := r.store.jobRecords(id), r.store.jobRecords(other)
			if records < 6 {
				t.Fatalf("the job has %d records, want its job, idempotency, stage, counter and task records", records)
			}
			stopped := false
			if c.stopAt != "" {
				r.svc.DeleteStepHook = func(job, step string) error {
					if job == id && step == c.stopAt && !stopped {
						stopped = true
						return errInjected
					}
					return nil
				}
			}
			if c.faultAt != "" {
				fault := func(m string) error {
					if m == c.faultAt && !stopped {
						stopped = true
						return errInjected
					}
					return nil
				}
				if c.faultAt == "DeletePrefix" {
					r.blob.setFault(fault)
				} else {
					r.store.setFaults(fault, nil)
				}
			}
			d, err := r.svc.DeleteJob(r.ctx, c.owner, id)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("DeleteJob: %v, want %v", err, c.wantErr)
				}
				if got := r.blob.keysUnder(blob.JobPrefix(id)); !slices.Equal(got, before) {
					t.Errorf("objects %v after a refused deletion, were %v", got, before)
				}
				if n := r.store.jobRecords(id); n != records {
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
				if !errors.Is(err, errInjected) {
					t.Fatalf("DeleteJob stopped at %s%s: %v, want the injected fault", c.stopAt, c.faultAt, err)
				}
				// Marked before anything went: the job is gone to every
				// route already, and to its owner's list.
				if _, err := r.svc.OwnedJob(r.ctx, "tester", id); !errors.Is(err, batch.ErrNotFound) {
					t.Errorf("status of a job half deleted: %v, want not found", err)
				}
				if _, err := r.svc.Outputs(r.ctx, OutputsRequest{Owner: "tester", ID: id}); !errors.Is(err, batch.ErrNotFound) {
					t.Errorf("outputs of a job half deleted: %v, want not found", err)
				}
				// Another owner still cannot finish (or learn of) it.
				if _, err := r.svc.DeleteJob(r.ctx, "mallory", id); !errors.Is(err, batch.ErrNotFound) {
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
			if n := r.store.jobRecords(id); n != 0 {
				t.Errorf("%d records of the job left", n)
			}
			if got := r.blob.keysUnder(blob.JobPrefix(id)); len(got) != 0 {
				t.Errorf("objects left: %v", got)
			}
			if got := r.blob.keysUnder(blob.JobPrefix(other)); !slices.Equal(got, otherKeys) {
				t.Errorf("the other job's objects: %v, were %v", got, otherKeys)
			}
			if n := r.store.jobRecords(other); n != otherRecords {
				t.Errorf("the other job has %d records, had %d", n, otherRecords)
			}
			for _, owner := range []string{"tester", "mallory"} {
				if _, err := r.svc.DeleteJob(r.ctx, owner, id); !errors.Is(err, batch.ErrNotFound) {
					t.Errorf("DELETE by %s after the deletion: %v, want not found", owner, err)
				}
			}
			if _, err := r.svc.OwnedJob(r.ctx, "tester", id); !errors.Is(err, batch.ErrNotFound) {
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
			r.store.setFaults(func(m string) error {
				if m == "DeleteJobRecords" && recordsAt.IsZero() {
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
	budget := &budgetStore{fakeStore: r.store, budget: 2}
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
	if calls < 2 || r.store.jobRecords(id) != 0 {
		t.Errorf("deleted in %d calls, %d records left; want several calls and none left", calls+1, r.store.jobRecords(id))
	}
}

// budgetStore caps the budget DeleteJobRecords is given.
type budgetStore struct {
	*fakeStore
	budget int
}

func (b *budgetStore) DeleteJobRecords(ctx context.Context, job string, budget int) (int, bool, error) {
	return b.fakeStore.DeleteJobRecords(ctx, job, min(budget, b.budget))
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
			if gone := r.store.jobRecords(id) == 0; gone != c.wantGone {
				t.Fatalf("records gone %v, want %v", gone, c.wantGone)
			}
			if !c.wantGone && c.retention > 0 {
				r.store.mu.Lock()
				due := r.store.jobs[id].due
				r.store.mu.Unlock()
				if !due.Equal(ended.Add(c.retention)) {
					t.Errorf("due %s, want the end plus the retention %s", due, ended.Add(c.retention))
				}
			}
		})
	}
}
