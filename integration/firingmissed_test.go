package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
)

// Of two firers of one time, one plans it on time and starts its job, the
// other plans it later, past the grace, and under catchUp=skipMissed
// records it missed with the cursor's move. The starter's cursor then
// loses, and it puts its started run on its own: that replaces the missed
// record, so the history names the job that exists and runs.
func TestFiringStartedRunReplacesMissed(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	f := stallTheSecondHoursStarter(t, r, `,"catchUp":"skipMissed"`) // hourly, overlap=skip
	sc := f.sc
	// Another firer plans t1 past the grace: missed, with the cursor.
	r.at(time.Hour + schedule.DefaultGrace + time.Minute)
	r.fireUntilCaughtUp()
	if runs := r.runs("alice", sc.ID); len(runs) != 2 || runs[0].Action != "missed" {
		t.Fatalf("runs after the late firer: %+v, want t1 missed", runs)
	}
	f.finishAndWantStarted()
}

// A started run and the record of its time already there, at the store:
// a started run replaces a skipped one, and a missed one of its time
// alone, whole; over a missed record that also summarises later times (a
// per-minute schedule whose late firer's Missed.First is the time the
// other started on time) it keeps that summary, one fewer; any other
// record wins.
func TestStartedRunOverARecordedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, envOptions{noRun: true})
	ctx := context.Background()
	store := e.r.Store
	t1 := time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC)
	started := dynamo.Run{Scheduled: t1, Started: t1.Add(time.Second), JobID: "jstarted", Action: dynamo.RunStarted}
	for i, tc := range []struct {
		name      string
		recorded  dynamo.Run
		want      dynamo.RunAction
		wantJob   string
		wantMiss  int64
		wantThrou time.Time
	}{
		{"skipped", dynamo.Run{Scheduled: t1, Action: dynamo.RunSkipped}, dynamo.RunStarted, "jstarted", 0, time.Time{}},
		{"missed, this time alone", dynamo.Run{Scheduled: t1, Through: t1, Missed: 1, Action: dynamo.RunMissed, Note: "1 missed"},
			dynamo.RunStarted, "jstarted", 0, time.Time{}},
		{"missed, with later times", dynamo.Run{Scheduled: t1, Through: t1.Add(4 * time.Minute), Missed: 5, Action: dynamo.RunMissed, Note: "5 missed"},
			dynamo.RunStarted, "jstarted", 4, t1.Add(4 * time.Minute)},
		{"started by another", dynamo.Run{Scheduled: t1, JobID: "jother", Action: dynamo.RunStarted}, dynamo.RunStarted, "jother", 0, time.Time{}},
		{"nothing", dynamo.Run{}, dynamo.RunStarted, "jstarted", 0, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := fmt.Sprintf("sched-over-%d", i)
			if tc.recorded.Action != "" {
				if err := store.SchedulePutRun(ctx, id, tc.recorded); err != nil {
					t.Fatal(err)
				}
			}
			if err := store.SchedulePutRun(ctx, id, started); err != nil {
				t.Fatal(err)
			}
			runs, err := store.ScheduleRuns(ctx, id, time.Time{}, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(runs) != 1 {
				t.Fatalf("runs %+v: want one", runs)
			}
			got := runs[0]
			if got.Action != tc.want || got.JobID != tc.wantJob || got.Missed != tc.wantMiss || !got.Through.Equal(tc.wantThrou) {
				t.Fatalf("run %+v: want %s job %s, %d missed through %v", got, tc.want, tc.wantJob, tc.wantMiss, tc.wantThrou)
			}
			if tc.wantMiss > 0 && !strings.Contains(got.Note, "4 later scheduled times") {
				t.Fatalf("run %+v: the note does not name the later times missed", got)
			}
		})
	}
}
