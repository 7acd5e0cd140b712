package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
)

// These tests use the real clock: SQS's delays are real. Each schedule is
// due a few seconds after the sweep that hands it off.

// timerSchedule creates an hourly rate schedule whose first firing is at
// a whole second at least lead from now, and returns it and that time.
func timerSchedule(t *testing.T, svc *control.Service, owner string, lead time.Duration) (control.ScheduleView, time.Time) {
	t.Helper()
	at := time.Now().UTC().Add(lead + time.Second).Truncate(time.Second)
	body := fmt.Sprintf(`{"name":"soon","expression":"rate(1 hour)","start":%q,"spec":%s}`, at.Format(time.RFC3339), schedJobSpec)
	v, err := svc.CreateSchedule(context.Background(), owner, []byte(body))
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	return v, at
}

// A firing handed off by the sweep fires through the timer queue within
// 2 s of its scheduled time (and not before it), exactly once although two
// sweeps handed it off and a third sweep reaches it after it fired.
func TestTimerFiresOnTimeAndOnce(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	svc := e.r.Service
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sc, at := timerSchedule(t, svc, "alice", 8*time.Second)

	for i := range 2 {
		if c := mustSweep(t, svc); c.HandedOff != 1 || c.Fired != 0 {
			t.Fatalf("sweep %d before the firing: %+v, want one firing handed off and none fired", i, c)
		}
	}
	if n := messagesIn(t, e, e.r.Resources.Queues.Timer); n != 2 {
		t.Fatalf("timer queue holds %d messages, want the 2 handed off", n)
	}
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		e.r.RunTimers(ctx)
	}()

	var runs []control.ScheduleRun
	deadline := at.Add(10 * time.Second)
	for {
		l, err := svc.ScheduleRuns(ctx, "alice", sc.ID, 10, "")
		if err != nil {
			t.Fatal(err)
		}
		if runs = l.Runs; len(runs) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run by %s (scheduled %s)", deadline, at)
		}
		time.Sleep(50 * time.Millisecond) // polling the emulator
	}
	r := runs[0]
	if r.Action != "started" || !r.Scheduled.Equal(at) || r.StartedAt == nil {
		t.Fatalf("run %+v, want one started at %s", r, at)
	}
	late := r.StartedAt.Sub(at)
	t.Logf("scheduled %s, job created %s: %v late", at.Format(time.RFC3339Nano), r.StartedAt.Format(time.RFC3339Nano), late)
	if late < 0 || late > 2*time.Second {
		t.Fatalf("job created %v after its scheduled time, want within [0, 2s]", late)
	}

	// Both messages are consumed (the duplicate finds the time handled),
	// and a sweep after the time fires nothing more.
	for deadline := time.Now().Add(10 * time.Second); messagesIn(t, e, e.r.Resources.Queues.Timer) != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("timer queue still holds %d messages", messagesIn(t, e, e.r.Resources.Queues.Timer))
		}
		time.Sleep(50 * time.Millisecond) // polling the emulator
	}
	cancel()
	<-consumed
	if c := mustSweep(t, svc); c.Fired != 0 {
		t.Fatalf("sweep after the firing: %+v, want nothing fired", c)
	}
	l, err := svc.ScheduleRuns(context.Background(), "alice", sc.ID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := svc.ListJobs(context.Background(), control.ListJobsRequest{Owner: "alice", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Runs) != 1 || len(jobs.Jobs) != 1 || jobs.Jobs[0].ID != r.JobID {
		t.Fatalf("runs %+v, jobs %+v: want exactly one run and its job", l.Runs, jobs.Jobs)
	}
}

// Pausing a schedule after its firing was handed off drops the timer
// message when it arrives: no job, no run. Deleting does the same.
func TestTimerDroppedWhenPausedOrDeleted(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	svc := e.r.Service
	ctx := context.Background()
	paused, at := timerSchedule(t, svc, "bob", 8*time.Second)
	deleted, _ := timerSchedule(t, svc, "carol", 8*time.Second)
	if c := mustSweep(t, svc); c.HandedOff != 2 {
		t.Fatalf("sweep: %+v, want both firings handed off", c)
	}
	if _, err := svc.PauseSchedule(ctx, "bob", paused.ID); err != nil {
		t.Fatal(err)
	}
	if err := svc.DeleteSchedule(ctx, "carol", deleted.ID); err != nil {
		t.Fatal(err)
	}

	var outcomes []control.TimerOutcome
	url := e.r.Resources.Queues.Timer
	for deadline := at.Add(10 * time.Second); len(outcomes) < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("got %v by %s, want both timer messages", outcomes, deadline)
		}
		msgs, err := e.r.Queue.Receive(ctx, url, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			// Messages are meant to arrive 5 s early (the consumer reads
			// the schedule, then waits), plus up to a second of rounding.
			if time.Now().Before(at.Add(-6 * time.Second)) {
				t.Fatalf("timer message delivered at %s, more than 6 s before %s", time.Now(), at)
			}
			o, err := svc.FireTimer(ctx, m.Body)
			if err != nil {
				t.Fatalf("fire timer: %v", err)
			}
			outcomes = append(outcomes, o)
			if err := e.r.Queue.DeleteBatch(ctx, url, []string{m.Receipt}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, o := range outcomes {
		if o != control.TimerDropped {
			t.Fatalf("outcomes %v, want both dropped", outcomes)
		}
	}
	l, err := svc.ScheduleRuns(ctx, "bob", paused.ID, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"bob", "carol"} {
		jobs, err := svc.ListJobs(ctx, control.ListJobsRequest{Owner: owner, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.Jobs) != 0 {
			t.Fatalf("%s has jobs %+v, want none", owner, jobs.Jobs)
		}
	}
	if len(l.Runs) != 0 {
		t.Fatalf("paused schedule has runs %+v, want none", l.Runs)
	}
}

// scheduleReads is the real store, telling the test each time a schedule
// was read, so a test can act between a timer consumer's read and its
// firing.
type scheduleReads struct {
	*dynamo.Store
	read chan struct{}
}

func (s scheduleReads) ScheduleGet(ctx context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	r, err := s.Store.ScheduleGet(ctx, owner, id)
	s.read <- struct{}{}
	return r, err
}

// A timer message arrives before its time: the consumer reads the
// schedule, then waits for the time. A schedule paused or deleted during
// that wait gets no job (the job's transaction checks the schedule is as
// read) and the message is dropped; one left alone fires.
func TestTimerScheduleChangedDuringWait(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		during func(svc *control.Service, owner, id string) error
		want   control.TimerOutcome
		jobs   int
	}{
		{"unchanged", func(*control.Service, string, string) error { return nil }, control.TimerFired, 1},
		{"paused", func(svc *control.Service, owner, id string) error {
			_, err := svc.PauseSchedule(ctx, owner, id)
			return err
		}, control.TimerDropped, 0},
		{"deleted", func(svc *control.Service, owner, id string) error { return svc.DeleteSchedule(ctx, owner, id) }, control.TimerDropped, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newTestClock()
			spy := scheduleReads{Store: e.r.Store, read: make(chan struct{}, 16)}
			svc := newService(e, testTimings, spy, e.r.Queue, clk, newLogCounter().logger())
			owner := "wait-" + tc.name
			at := clk.Now().Add(time.Hour).Truncate(time.Minute)
			sc, err := svc.CreateSchedule(ctx, owner, []byte(fmt.Sprintf(
				`{"name":"later","expression":"rate(1 day)","start":%q,"overlap":"allow","spec":%s}`, at.Format(time.RFC3339), schedJobSpec)))
			if err != nil {
				t.Fatal(err)
			}
			// The sweep plans the schedule: its index entry moves to at.
			if c, err := svc.FireDue(ctx, clk.Now()); err != nil || c.Started != 0 {
				t.Fatalf("planning sweep: %+v, %v", c, err)
			}
			for len(spy.read) > 0 {
				<-spy.read
			}
			body, err := json.Marshal(map[string]string{"owner": owner, "firing": schedule.FiringKey(sc.ID, at), "bucket": schedule.BucketOf(sc.ID, at).Key()})
			if err != nil {
				t.Fatal(err)
			}
			// The message arrived a second early; the consumer waits a
			// real second for the time.
			clk.Advance(at.Add(-time.Second).Sub(clk.Now()))
			type result struct {
				o   control.TimerOutcome
				err error
			}
			done := make(chan result, 1)
			go func() {
				o, err := svc.FireTimer(ctx, string(body))
				done <- result{o, err}
			}()
			<-spy.read // the consumer has the schedule and is waiting
			if err := tc.during(svc, owner, sc.ID); err != nil {
				t.Fatal(err)
			}
			clk.Advance(time.Second) // the time arrives on the service's clock too
			r := <-done
			if r.err != nil || r.o != tc.want {
				t.Fatalf("FireTimer = %q, %v; want %q", r.o, r.err, tc.want)
			}
			jobs, err := svc.ListJobs(ctx, control.ListJobsRequest{Owner: owner, Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs.Jobs) != tc.jobs {
				t.Fatalf("%d jobs, want %d", len(jobs.Jobs), tc.jobs)
			}
		})
	}
}
