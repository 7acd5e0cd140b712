package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
	sm "github.com/batchwork/batchwork/statemachine"
)

// maxFiringRequests bounds the AWS requests of one firing of a one-task
// job through the timer queue's consumer: the schedule's read (1); the
// job's transaction (1); its submitted event: the outbox read, the bus
// and the outbox's delete (3); its root stage's start, plan, counter,
// task, message, count, materialized mark and completion check (9); the
// cursor's move with the index entry and the run record (1). A request
// added to the path shows here first.
const maxFiringRequests = 15

// One firing costs at most maxFiringRequests AWS requests, and the run
// record and the cursor still move together (one transaction): the job,
// its run and the schedule's last fired time all name the firing.
func TestFiringRequestsBounded(t *testing.T) {
	t.Parallel()
	var counter awsconf.Counter
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, install: counter.Install})
	clk := newTestClock()
	now := clk.Now()
	h0 := now.Truncate(time.Hour).Add(time.Hour)
	clk.Advance(h0.Add(-time.Minute).Sub(now))
	r := &schedRig{t: t, e: e, clk: clk, svc: r0service(e, clk), h0: h0}
	sc := r.create("alice", "")
	r.fireUntilCaughtUp() // plans the schedule: its entry moves to h0's bucket
	r.at(0)

	body, err := json.Marshal(map[string]string{
		"owner": "alice", "firing": schedule.FiringKey(sc.ID, h0), "bucket": schedule.BucketOf(sc.ID, h0).Key(),
	})
	if err != nil {
		t.Fatal(err)
	}
	before, _ := counter.Snapshot()
	out, err := r.svc.FireTimer(context.Background(), string(body))
	if err != nil || out != control.TimerFired {
		t.Fatalf("fire timer: %q, %v; want fired", out, err)
	}
	after, _ := counter.Snapshot()
	total, breakdown := 0, ""
	for _, k := range awsconf.Keys(after) {
		if d := after[k] - before[k]; d > 0 {
			total += d
			breakdown += fmt.Sprintf(" %s %d", k, d)
		}
	}
	t.Logf("one firing: %d requests:%s", total, breakdown)
	if total > maxFiringRequests {
		t.Errorf("one firing made %d AWS requests, want at most %d:%s", total, maxFiringRequests, breakdown)
	}

	runs := r.runs("alice", sc.ID)
	if len(runs) != 1 || runs[0].Action != "started" || !runs[0].Scheduled.Equal(h0) || runs[0].JobID == "" {
		t.Fatalf("runs %+v, want one started at %s", runs, h0)
	}
	v, err := r.svc.GetSchedule(context.Background(), "alice", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v.LastFired == nil || !v.LastFired.Equal(h0) || v.LastJobID != runs[0].JobID {
		t.Fatalf("schedule after the firing: last fired %v, last job %q; want %s and %s", v.LastFired, v.LastJobID, h0, runs[0].JobID)
	}
	if jobs := r.jobs("alice"); len(jobs) != 1 || jobs[0].ID != runs[0].JobID {
		t.Fatalf("jobs %+v, want the run's %s alone", jobs, runs[0].JobID)
	}
}

// The cursor's move records the runs of the times it handled in its own
// transaction: both or neither, a run already recorded is kept (the first
// record of a time wins) without stopping the move, and a firer whose
// cursor is stale records nothing.
func TestScheduleCursorRecordsRuns(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	ctx := context.Background()
	st := r.e.r.Store
	sc := r.create("alice", "")
	now := r.clk.Now()
	entry := dynamo.IndexEntry{Bucket: schedule.BucketOf(sc.ID, now), ScheduleID: sc.ID, Owner: "alice", At: now}
	t1, t2 := r.h0, r.h0.Add(time.Hour)
	started := dynamo.Run{Scheduled: t1, Action: dynamo.RunStarted, JobID: "j-first", Started: t1}

	// A stale cursor: nothing moves, no run is written.
	if err := st.ScheduleAdvanceCursor(ctx, "alice", sc.ID, t2, t1, "j-first", t2, entry, []dynamo.Run{started}, now); !errors.Is(err, dynamo.ErrCursorMoved) {
		t.Fatalf("advance from a stale cursor: %v, want ErrCursorMoved", err)
	}
	if runs := r.runs("alice", sc.ID); len(runs) != 0 {
		t.Fatalf("runs after a refused advance: %+v, want none", runs)
	}
	// The move and its run, together.
	if err := st.ScheduleAdvanceCursor(ctx, "alice", sc.ID, time.Time{}, t1, "j-first", t2, entry, []dynamo.Run{started}, now); err != nil {
		t.Fatal(err)
	}
	rec, err := st.ScheduleGet(ctx, "alice", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !rec.Cursor.Equal(t1) || rec.LastJob != "j-first" {
		t.Fatalf("schedule after the advance: cursor %s, last job %q; want %s, j-first", rec.Cursor, rec.LastJob, t1)
	}
	// t2's run recorded first (its firer died before its cursor moved):
	// a later firer's skipped run of t2 leaves it, and the cursor moves.
	next := dynamo.IndexEntry{Bucket: schedule.BucketOf(sc.ID, t2), ScheduleID: sc.ID, Owner: "alice", At: t2}
	if err := st.SchedulePutRun(ctx, sc.ID, dynamo.Run{Scheduled: t2, Action: dynamo.RunStarted, JobID: "j-second", Started: t2}); err != nil {
		t.Fatal(err)
	}
	skipped := dynamo.Run{Scheduled: t2, Action: dynamo.RunSkipped, Note: "previous run still running"}
	if err := st.ScheduleAdvanceCursor(ctx, "alice", sc.ID, t1, t2, "", t2.Add(time.Hour), next, []dynamo.Run{skipped}, t2); err != nil {
		t.Fatalf("advance with a run already recorded: %v", err)
	}
	if rec, err = st.ScheduleGet(ctx, "alice", sc.ID); err != nil || !rec.Cursor.Equal(t2) {
		t.Fatalf("schedule after the second advance: cursor %s, %v; want %s", rec.Cursor, err, t2)
	}
	got := r.runSummary(r.runs("alice", sc.ID))
	if want := []string{"started@0s", "started@1h0m0s"}; !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
}

// stallCursor is the store of a firer that sees the previous run ended
// (JobState of ended answers SUCCEEDED) and stalls before its first
// cursor move until released.
type stallCursor struct {
	*dynamo.Store
	ended            string
	once             sync.Once
	stalled, release chan struct{}
}

func (s *stallCursor) JobState(ctx context.Context, job string) (sm.JobState, error) {
	if job == s.ended {
		return sm.JobSucceeded, nil
	}
	return s.Store.JobState(ctx, job)
}

func (s *stallCursor) ScheduleAdvanceCursor(ctx context.Context, owner, id string, old, cur time.Time, lastJob string, next time.Time, entry dynamo.IndexEntry, runs []dynamo.Run, now time.Time) error {
	s.once.Do(func() {
		close(s.stalled)
		<-s.release
	})
	return s.Store.ScheduleAdvanceCursor(ctx, owner, id, old, cur, lastJob, next, entry, runs, now)
}

// Two firers of one time disagree on overlap=skip: one sees the previous
// run still going and records the time skipped, moving the cursor; the
// other saw it ended and started a job first. The history names the job
// that exists: the losing firer's started run replaces the skipped one.
func TestFiringStartedRunReplacesSkipped(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	ctx := context.Background()
	f := stallTheSecondHoursStarter(t, r, "") // hourly, overlap=skip
	sc, body := f.sc, f.body
	if out, err := r.svc.FireTimer(ctx, string(body)); err != nil || out != control.TimerFired {
		t.Fatalf("the skipping firer: %q, %v; want fired (skipped)", out, err)
	}
	if runs := r.runs("alice", sc.ID); len(runs) != 2 || runs[0].Action != "skipped" {
		t.Fatalf("runs after the skip: %+v, want t1 skipped", runs)
	}
	f.finishAndWantStarted()
}

// stalledStarter is a firer of an hourly schedule's second hour (t1),
// stalled after it wrote t1's job and before its cursor moved.
type stalledStarter struct {
	t    *testing.T
	r    *schedRig
	sc   control.ScheduleView
	t1   time.Time
	body string // t1's timer message
	st   *stallCursor
	done chan error
}

// stallTheSecondHoursStarter creates alice's hourly schedule (with the
// extra spec fields), fires its first hour, and starts a firer of the
// second hour that stalls after writing that hour's job.
func stallTheSecondHoursStarter(t *testing.T, r *schedRig, extra string) *stalledStarter {
	t.Helper()
	sc := r.create("alice", extra)
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
	f := &stalledStarter{t: t, r: r, sc: sc, t1: t1, body: string(body), done: make(chan error, 1),
		st: &stallCursor{Store: r.e.r.Store, ended: first[0].JobID, stalled: make(chan struct{}), release: make(chan struct{})}}
	starter := r0serviceOver(r.e, r.clk, f.st)
	go func() {
		_, err := starter.FireTimer(context.Background(), f.body)
		f.done <- err
	}()
	<-f.st.stalled // t1's job is written, its cursor not moved
	return f
}

// finishAndWantStarted lets the stalled firer go on (its cursor loses)
// and checks that the history names the job that exists: t1 started,
// with the second job.
func (f *stalledStarter) finishAndWantStarted() {
	f.t.Helper()
	close(f.st.release)
	if err := <-f.done; err != nil {
		f.t.Fatalf("the starting firer: %v", err)
	}
	runs := f.r.runs("alice", f.sc.ID)
	jobs := f.r.jobs("alice")
	if len(jobs) != 2 {
		f.t.Fatalf("jobs %+v: want h0's and t1's", jobs)
	}
	if len(runs) != 2 || runs[0].Action != "started" || !runs[0].Scheduled.Equal(f.t1) || runs[0].JobID != jobs[0].ID {
		f.t.Fatalf("runs %+v, jobs %+v: want t1 started with the second job (the history must name the job that exists)", runs, jobs)
	}
}
