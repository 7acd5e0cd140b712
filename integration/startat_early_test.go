package integration

import (
	"context"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The sweep's firing step reads the whole minute of a start entry's
// bucket: one it reads before the entry's time leaves the job WAITING
// (the minute is read again by the next pass), and the pass at or after
// the time starts it.
func TestStartAtNotBeforeItsTime(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	svc := e.r.Service
	ctx := context.Background()
	// Half past a minute two or three minutes ahead: past the timer
	// handoff, and a sweep 10 s before it looks at the same minute.
	at := time.Now().UTC().Add(2 * time.Minute).Truncate(time.Minute).Add(30 * time.Second)
	res := submitAt(t, svc, "dave", "at-early", at)
	c, err := svc.FireDue(ctx, at.Add(-10*time.Second))
	if err != nil || c.Started != 0 {
		t.Fatalf("fire due 10 s before the start: %+v, %v; want nothing started", c, err)
	}
	if s, err := e.r.Store.JobState(ctx, res.JobID); err != nil || s != sm.JobWaiting {
		t.Fatalf("job %s, %v 10 s before its start; want WAITING", s, err)
	}
	if c, err := svc.FireDue(ctx, at); err != nil || c.Started != 1 {
		t.Fatalf("fire due at the start: %+v, %v; want the job started", c, err)
	}
	if s, err := e.r.Store.JobState(ctx, res.JobID); err != nil || s != sm.JobRunning {
		t.Fatalf("job %s, %v at its start; want RUNNING", s, err)
	}
}
