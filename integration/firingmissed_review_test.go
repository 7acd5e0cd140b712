package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/schedule"
)

// Review (firing, 2cb29ea): of two firers of one time, one plans it on
// time and starts its job, the other plans it later, past the grace, and
// under catchUp=skipMissed records it missed with the cursor's move. The
// starter's cursor then loses, and its started run, put on its own, is
// refused: a started run replaces only a skipped one. The history says the
// time was missed while its job exists and runs. Before the run rode in
// the cursor's transaction, the starter recorded its run right after its
// job, before its cursor move, and the missed record was the one refused.
func TestFiringStartedRunReplacesMissed(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	ctx := context.Background()
	sc := r.create("alice", `,"catchUp":"skipMissed"`) // hourly, overlap=skip
	r.fireUntilCaughtUp()
	r.at(0)
	r.fire()
	first := r.runs("alice", sc.ID)
	if len(first) != 1 || first[0].Action != "started" {
		t.Fatalf("runs after h0: %+v, want one started", first)
	}
	r.fireUntilCaughtUp() // its entry moves to h0+1h's bucket
	r.at(time.Hour)
	t1 := r.h0.Add(time.Hour)
	body, err := json.Marshal(map[string]string{
		"owner": "alice", "firing": schedule.FiringKey(sc.ID, t1), "bucket": schedule.BucketOf(sc.ID, t1).Key(),
	})
	if err != nil {
		t.Fatal(err)
	}
	st := &stallCursor{Store: r.e.r.Store, ended: first[0].JobID, stalled: make(chan struct{}), release: make(chan struct{})}
	starter := r0serviceOver(r.e, r.clk, st)
	done := make(chan error, 1)
	go func() {
		_, err := starter.FireTimer(ctx, string(body))
		done <- err
	}()
	<-st.stalled // t1's job is written (on time), its cursor not moved
	// Another firer plans t1 past the grace: missed, with the cursor.
	r.at(time.Hour + schedule.DefaultGrace + time.Minute)
	r.fireUntilCaughtUp()
	if runs := r.runs("alice", sc.ID); len(runs) != 2 || runs[0].Action != "missed" {
		t.Fatalf("runs after the late firer: %+v, want t1 missed", runs)
	}
	close(st.release)
	if err := <-done; err != nil {
		t.Fatalf("the starting firer: %v", err)
	}
	runs := r.runs("alice", sc.ID)
	jobs := r.jobs("alice")
	if len(jobs) != 2 {
		t.Fatalf("jobs %+v: want h0's and t1's", jobs)
	}
	if len(runs) != 2 || runs[0].Action != "started" || !runs[0].Scheduled.Equal(t1) || runs[0].JobID != jobs[0].ID {
		t.Fatalf("runs %+v, jobs %+v: want t1 started with the second job (the history must name the job that exists)", runs, jobs)
	}
}
