package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

func init() { cases = append(cases, startCases...) }

// startCases check a job submitted with a start time (dynamo/jobstart.go).
var startCases = []struct {
	name string
	run  func(t *testing.T, r *rig)
}{
	{"a WAITING job starts no stage, then starts once", func(t *testing.T, r *rig) {
		id := r.createWaiting()
		err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: id, Stage: 0, Event: sm.StageStart, Now: r.now})
		if !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("start a WAITING job's stage: %v; want sm.ErrInvalidTransition", err)
		}
		start := dynamo.JobStartParams{Job: id, Roots: []int{0}, Now: r.now.Add(time.Second), StageDue: r.now.Add(time.Hour)}
		if err := r.s.JobStart(r.ctx, start); err != nil {
			t.Fatalf("start: %v", err)
		}
		if st, err := r.s.JobState(r.ctx, id); err != nil || st != sm.JobRunning {
			t.Fatalf("state after the start: %s, %v; want RUNNING", st, err)
		}
		if j, err := r.s.JobGet(r.ctx, id); err != nil || !j.Started.Equal(start.Now) {
			t.Fatalf("job after the start: started %s, %v; want %s", j.Started, err, start.Now)
		}
		if err := r.s.JobStart(r.ctx, start); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("start again: %v; want sm.ErrInvalidTransition", err)
		}
		if err := r.s.StageTransition(r.ctx, dynamo.StageTransitionParams{Job: id, Stage: 0, Event: sm.StageStart, Now: r.now}); err != nil {
			t.Fatalf("start the started job's root stage: %v", err)
		}
	}},
	{"a WAITING job cancelled never starts", func(t *testing.T, r *rig) {
		id := r.createWaiting()
		if _, err := r.s.JobEndEvent(r.ctx, id, sm.JobCancel, "cancelled by its owner", "", r.now); err != nil {
			t.Fatalf("cancel a WAITING job: %v", err)
		}
		err := r.s.JobStart(r.ctx, dynamo.JobStartParams{Job: id, Roots: []int{0}, Now: r.now, StageDue: r.now.Add(time.Hour)})
		if !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("start a cancelled job: %v; want sm.ErrInvalidTransition", err)
		}
		if st, err := r.s.JobState(r.ctx, id); err != nil || st != sm.JobCancelled {
			t.Fatalf("state: %s, %v; want CANCELLED", st, err)
		}
	}},
}

// createWaiting creates a job that starts in an hour, and checks it WAITING.
func (r *rig) createWaiting() string {
	r.t.Helper()
	p := r.jobParams(owner, "waiting-"+randHex(4), 1)
	p.StartAt = r.now.Add(time.Hour)
	id, created, err := r.s.JobCreate(r.ctx, p)
	if err != nil || !created {
		r.t.Fatalf("create a WAITING job: created %v, %v", created, err)
	}
	if st, err := r.s.JobState(r.ctx, id); err != nil || st != sm.JobWaiting {
		r.t.Fatalf("state of a job with a start time: %s, %v; want WAITING", st, err)
	}
	if j, err := r.s.JobGet(r.ctx, id); err != nil || !j.StartAt.Equal(p.StartAt) {
		r.t.Fatalf("job's start time: %s, %v; want %s", j.StartAt, err, p.StartAt)
	}
	return id
}
