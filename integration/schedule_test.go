package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// schedRig is a Batchwork installation with no executors and no sweep
// ticker: the tests fire schedules by calling FireDue on services that
// read a test clock, so "an hour later" takes no time.
type schedRig struct {
	t   *testing.T
	e   *env
	clk *testClock
	svc *control.Service
	// h0 is the first whole hour after the rig's start; the clock starts a
	// minute before it.
	h0 time.Time
}

func newSchedRig(t *testing.T) *schedRig {
	t.Helper()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	clk := newTestClock()
	now := clk.Now()
	h0 := now.Truncate(time.Hour).Add(time.Hour)
	clk.Advance(h0.Add(-time.Minute).Sub(now))
	return &schedRig{t: t, e: e, clk: clk, svc: r0service(e, clk), h0: h0}
}

func r0service(e *env, clk *testClock) *control.Service {
	return newService(e, testTimings, e.r.Store, e.r.Queue, clk, newLogCounter().logger())
}

const schedJobSpec = `{"name":"report","stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`

// create creates an hourly schedule for owner with the given extra fields.
func (r *schedRig) create(owner, extra string) control.ScheduleView {
	r.t.Helper()
	body := `{"name":"hourly","expression":"0 * * * *","spec":` + schedJobSpec + extra + `}`
	v, err := r.svc.CreateSchedule(context.Background(), owner, []byte(body))
	if err != nil {
		r.t.Fatalf("create schedule: %v", err)
	}
	return v
}

// fire runs FireDue once at the clock's time.
func (r *schedRig) fire() control.FireCounts {
	r.t.Helper()
	c, err := r.svc.FireDue(context.Background(), r.clk.Now())
	if err != nil {
		r.t.Fatalf("fire due: %v (counts %+v)", err, c)
	}
	return c
}

// fireUntilCaughtUp runs FireDue until the watermark reaches the minute
// before now (a sweep walks a bounded number of minutes per run), then
// once more for the current minute.
func (r *schedRig) fireUntilCaughtUp() {
	r.t.Helper()
	want := r.clk.Now().Truncate(time.Minute).Add(-time.Minute)
	for i := 0; ; i++ {
		r.fire()
		wm, _, err := r.e.r.Store.ScheduleWatermark(context.Background())
		if err != nil {
			r.t.Fatal(err)
		}
		if !wm.Before(want) {
			r.fire() // the current minute, which the watermark never passes
			return
		}
		if i == 50 {
			r.t.Fatalf("watermark %s does not reach %s", wm, want)
		}
	}
}

// at sets the clock to h0+d.
func (r *schedRig) at(d time.Duration) {
	r.clk.Advance(r.h0.Add(d).Sub(r.clk.Now()))
}

func (r *schedRig) jobs(owner string) []control.JobSummary {
	r.t.Helper()
	l, err := r.svc.ListJobs(context.Background(), control.ListJobsRequest{Owner: owner, Limit: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	return l.Jobs
}

func (r *schedRig) runs(owner, id string) []control.ScheduleRun {
	r.t.Helper()
	l, err := r.svc.ScheduleRuns(context.Background(), owner, id, 100, "")
	if err != nil {
		r.t.Fatal(err)
	}
	return l.Runs
}

func (r *schedRig) jobState(owner, id string) string {
	r.t.Helper()
	st, err := r.svc.Status(context.Background(), owner, id)
	if err != nil {
		r.t.Fatal(err)
	}
	return st.State
}

// runSummary renders runs oldest first as "action@offset-from-h0[+]", with
// "+" marking a catch-up run, so a whole history is compared at once.
func (r *schedRig) runSummary(runs []control.ScheduleRun) []string {
	var out []string
	for _, run := range slices.Backward(runs) {
		s := fmt.Sprintf("%s@%s", run.Action, run.Scheduled.Sub(r.h0))
		if run.CatchUp {
			s += "+"
		}
		out = append(out, s)
	}
	return out
}

// Two (here four) sweeps racing over the same due bucket create exactly
// one job per scheduled time: every sweep submits with the firing's
// idempotency key, and only one advances the schedule's cursor.
func TestScheduleNoDoubleFiring(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	sc := r.create("racer", `,"overlap":"allow"`)
	sweepers := make([]*control.Service, 4)
	for i := range sweepers {
		sweepers[i] = r0service(r.e, r.clk)
	}
	r.fire() // plans the new schedule: its first firing is h0
	for hour := range 3 {
		// Sweeps run every minute or so; catch the watermark up to just
		// before the firing, then race at it.
		r.at(time.Duration(hour)*time.Hour - 30*time.Second)
		r.fireUntilCaughtUp()
		r.at(time.Duration(hour)*time.Hour + 2*time.Second)
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, len(sweepers))
		for i, svc := range sweepers {
			wg.Go(func() {
				<-start
				_, errs[i] = svc.FireDue(context.Background(), r.clk.Now())
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("hour %d: sweeper %d: %v", hour, i, err)
			}
		}
		if got := len(r.jobs("racer")); got != hour+1 {
			t.Fatalf("after the firing at h0+%dh: %d jobs, want %d", hour, got, hour+1)
		}
	}
	runs := r.runs("racer", sc.ID)
	if got, want := r.runSummary(runs), []string{"started@0s", "started@1h0m0s", "started@2h0m0s"}; !slices.Equal(got, want) {
		t.Fatalf("runs %v, want %v", got, want)
	}
	jobs := r.jobs("racer")
	for _, run := range runs {
		if !slices.ContainsFunc(jobs, func(j control.JobSummary) bool { return j.ID == run.JobID }) {
			t.Errorf("run %+v names a job that is not the owner's", run)
		}
		if run.StartedAt == nil || run.StartedAt.Before(run.Scheduled) || run.StartedAt.Sub(run.Scheduled) > 5*time.Second {
			t.Errorf("run %+v: started at %v, want within seconds of its scheduled time", run, run.StartedAt)
		}
	}
	got, err := r.svc.GetSchedule(context.Background(), "racer", sc.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastFired == nil || !got.LastFired.Equal(r.h0.Add(2*time.Hour)) || got.Next == nil || !got.Next.Equal(r.h0.Add(3*time.Hour)) {
		t.Errorf("schedule after three firings: lastFired %v, next %v", got.LastFired, got.Next)
	}
}

// After three hours of downtime an hourly schedule fires once under
// fireOnce and not at all under skipMissed, and the history says which.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	once := r.create("once", `,"catchUp":"fireOnce","overlap":"allow"`)
	skip := r.create("skip", `,"catchUp":"skipMissed","overlap":"allow"`)
	r.fire()
	r.at(time.Second)
	r.fire() // h0 fires on time for both
	// Down from just after h0 until 10 minutes past h0+3h: h0+1h, h0+2h
	// and h0+3h (now beyond the grace) were missed.
	r.at(3*time.Hour + 10*time.Minute)
	r.fireUntilCaughtUp()

	if got, want := r.runSummary(r.runs("once", once.ID)), []string{"started@0s", "started@1h0m0s+"}; !slices.Equal(got, want) {
		t.Errorf("fireOnce runs %v, want %v", got, want)
	}
	if n := len(r.jobs("once")); n != 2 {
		t.Errorf("fireOnce: %d jobs, want 2 (h0 and one catch-up)", n)
	}
	cu := r.runs("once", once.ID)[0]
	if cu.MissedCount != 3 || cu.Through == nil || !cu.Through.Equal(r.h0.Add(3*time.Hour)) || cu.JobID == "" {
		t.Errorf("catch-up run %+v: want 3 missed times through h0+3h and a job", cu)
	}

	if got, want := r.runSummary(r.runs("skip", skip.ID)), []string{"started@0s", "missed@1h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("skipMissed runs %v, want %v", got, want)
	}
	if n := len(r.jobs("skip")); n != 1 {
		t.Errorf("skipMissed: %d jobs, want only h0's", n)
	}
	missed := r.runs("skip", skip.ID)[0]
	if missed.MissedCount != 3 || missed.JobID != "" || !strings.Contains(missed.Note, "skipMissed") {
		t.Errorf("missed entry %+v: want 3 missed times, no job, a note naming the policy", missed)
	}

	// Both go on normally from there.
	r.at(4*time.Hour + time.Second)
	r.fireUntilCaughtUp()
	if n := len(r.jobs("once")); n != 3 {
		t.Errorf("fireOnce after h0+4h: %d jobs, want 3", n)
	}
	if n := len(r.jobs("skip")); n != 2 {
		t.Errorf("skipMissed after h0+4h: %d jobs, want 2", n)
	}
}

// The overlap policies, with the previous run still RUNNING (no executors
// run here, so every job stays RUNNING until cancelled).
func TestScheduleOverlapPolicies(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	ctx := context.Background()
	skip := r.create("skip", `,"overlap":"skip"`)
	allow := r.create("allow", `,"overlap":"allow"`)
	cancel := r.create("cancel", `,"overlap":"cancelPrevious"`)
	r.fire()
	r.at(time.Second)
	r.fire()
	first := map[string]string{}
	for _, o := range []string{"skip", "allow", "cancel"} {
		js := r.jobs(o)
		if len(js) != 1 {
			t.Fatalf("%s: %d jobs after h0, want 1", o, len(js))
		}
		first[o] = js[0].ID
	}
	r.at(time.Hour + time.Second)
	r.fireUntilCaughtUp()

	if got, want := r.runSummary(r.runs("skip", skip.ID)), []string{"started@0s", "skipped@1h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("skip: runs %v, want %v", got, want)
	}
	if n := len(r.jobs("skip")); n != 1 || r.jobState("skip", first["skip"]) != string(sm.JobRunning) {
		t.Errorf("skip: %d jobs, first %s; want the first alone, still RUNNING", n, r.jobState("skip", first["skip"]))
	}

	if js := r.jobs("allow"); len(js) != 2 || js[0].State != string(sm.JobRunning) || js[1].State != string(sm.JobRunning) {
		t.Errorf("allow: jobs %+v, want two RUNNING side by side", js)
	}

	cruns := r.runs("cancel", cancel.ID)
	if got, want := r.runSummary(cruns), []string{"started@0s", "started@1h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("cancelPrevious: runs %v, want %v", got, want)
	}
	if st := r.jobState("cancel", first["cancel"]); st != string(sm.JobCancelled) {
		t.Errorf("cancelPrevious: the previous run is %s, want CANCELLED", st)
	}
	if st := r.jobState("cancel", cruns[0].JobID); st != string(sm.JobRunning) {
		t.Errorf("cancelPrevious: the new run is %s, want RUNNING", st)
	}
	if cruns[1].Status != string(sm.JobCancelled) || cruns[0].Status != string(sm.JobRunning) {
		t.Errorf("cancelPrevious: history statuses %q, %q; want RUNNING, CANCELLED (newest first)", cruns[0].Status, cruns[1].Status)
	}

	// Skip only holds while the previous run is going.
	if _, err := r.svc.Cancel(ctx, "skip", first["skip"]); err != nil {
		t.Fatal(err)
	}
	r.at(2*time.Hour + time.Second)
	r.fireUntilCaughtUp()
	if got, want := r.runSummary(r.runs("skip", skip.ID)), []string{"started@0s", "skipped@1h0m0s", "started@2h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("skip after the previous run ended: runs %v, want %v", got, want)
	}
	_ = allow
}

// Pausing and deleting stop firings, including an index entry already
// due; resuming fires from then on without catching up the pause.
func TestSchedulePauseAndDelete(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	ctx := context.Background()
	paused := r.create("p", `,"overlap":"allow"`)
	deleted := r.create("d", `,"overlap":"allow"`)
	r.fire()
	r.at(time.Second)
	r.fire()

	if v, err := r.svc.PauseSchedule(ctx, "p", paused.ID); err != nil || !v.Paused {
		t.Fatalf("pause: %+v, %v", v, err)
	}
	if _, err := r.svc.PauseSchedule(ctx, "p", paused.ID); err != nil {
		t.Fatalf("pausing again: %v", err)
	}
	if err := r.svc.DeleteSchedule(ctx, "d", deleted.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.GetSchedule(ctx, "d", deleted.ID); err == nil {
		t.Fatal("a deleted schedule is still there")
	}
	r.at(time.Hour + time.Second)
	r.fireUntilCaughtUp()
	r.at(2*time.Hour + 30*time.Minute)
	r.fireUntilCaughtUp()
	if n, m := len(r.jobs("p")), len(r.jobs("d")); n != 1 || m != 1 {
		t.Fatalf("after pause and delete: %d and %d jobs, want only h0's each", n, m)
	}
	if entries := scheduleIndexEntries(t, r.e); len(entries) != 0 {
		t.Errorf("index entries left for stopped schedules: %v", entries)
	}

	if v, err := r.svc.ResumeSchedule(ctx, "p", paused.ID); err != nil || v.Paused {
		t.Fatalf("resume: %+v, %v", v, err)
	}
	r.fire()
	r.at(3*time.Hour + time.Second)
	r.fireUntilCaughtUp()
	if got, want := r.runSummary(r.runs("p", paused.ID)), []string{"started@0s", "started@3h0m0s"}; !slices.Equal(got, want) {
		t.Errorf("resumed: runs %v, want %v (nothing for the paused hours)", got, want)
	}
}

// scheduleIndexEntries lists the upcoming-firings index by scanning the
// test's table (only tests scan).
func scheduleIndexEntries(t *testing.T, e *env) []string {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).Scan(context.Background(), &dynamodb.ScanInput{
		TableName: &e.r.Resources.Table, FilterExpression: aws.String("begins_with(pk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "SCHB#"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, it := range out.Items {
		keys = append(keys, it["pk"].(*types.AttributeValueMemberS).Value+"/"+it["sk"].(*types.AttributeValueMemberS).Value)
	}
	return keys
}

// The /schedules routes end to end, owner isolation, and bad input: a 4xx
// naming the field, with nothing written.
func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	before, err := countItems(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	bad := []struct{ name, body, field string }{
		{"invalid cron", `{"name":"n","expression":"61 * * * *","spec":` + schedJobSpec + `}`, "expression"},
		{"unknown time zone", `{"name":"n","expression":"0 * * * *","timeZone":"Mars/Olympus","spec":` + schedJobSpec + `}`, "timeZone"},
		{"end before start", `{"name":"n","expression":"0 * * * *","start":"2030-01-02T00:00:00Z","end":"2030-01-01T00:00:00Z","spec":` + schedJobSpec + `}`, "end"},
		{"bad spec", `{"name":"n","expression":"0 * * * *","spec":{"name":"x","stages":[]}}`, "spec.stages"},
		{"unknown policy", `{"name":"n","expression":"0 * * * *","overlap":"queue","spec":` + schedJobSpec + `}`, "overlap"},
		{"server field", `{"id":"s1","name":"n","expression":"0 * * * *","spec":` + schedJobSpec + `}`, "id"},
	}
	for _, tc := range bad {
		resp := e.call("alice", http.MethodPost, "/schedules", []byte(tc.body), "Content-Type", "application/json")
		if resp.Status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400: %s", tc.name, resp.Status, resp.Body)
			continue
		}
		if ae := resp.apiErr(t); ae.Field != tc.field {
			t.Errorf("%s: field %q, want %q (%s)", tc.name, ae.Field, tc.field, ae.Message)
		}
	}
	if after, err := countItems(ctx, e); err != nil || after != before {
		t.Fatalf("bad schedules wrote %d items (err %v)", after-before, err)
	}

	var sc control.ScheduleView
	e.callJSON("alice", http.MethodPost, "/schedules", []byte(`{"name":"nightly","expression":"30 2 * * *","timeZone":"Europe/Paris","spec":`+schedJobSpec+`}`), http.StatusCreated, &sc)
	if !control.ScheduleIDPattern.MatchString(sc.ID) || sc.Owner != "alice" || sc.Overlap != schedule.OverlapSkip || sc.CatchUp != schedule.CatchUpFireOnce {
		t.Fatalf("created %+v", sc)
	}
	var got control.ScheduleView
	e.callJSON("alice", http.MethodGet, "/schedules/"+sc.ID, nil, http.StatusOK, &got)
	if got.ID != sc.ID || got.Expression != "30 2 * * *" || got.TimeZone != "Europe/Paris" {
		t.Errorf("get %+v", got)
	}
	var list control.ScheduleList
	e.callJSON("alice", http.MethodGet, "/schedules", nil, http.StatusOK, &list)
	if len(list.Schedules) != 1 || list.Schedules[0].ID != sc.ID {
		t.Errorf("alice's list %+v", list)
	}
	e.callJSON("bob", http.MethodGet, "/schedules", nil, http.StatusOK, &list)
	if len(list.Schedules) != 0 {
		t.Errorf("bob sees alice's schedules: %+v", list)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/schedules/" + sc.ID}, {http.MethodPost, "/schedules/" + sc.ID + "/pause"},
		{http.MethodPost, "/schedules/" + sc.ID + "/resume"}, {http.MethodDelete, "/schedules/" + sc.ID},
		{http.MethodGet, "/schedules/" + sc.ID + "/runs"},
	} {
		if resp := e.call("bob", c.method, c.path, nil); resp.Status != http.StatusNotFound || resp.apiErr(t).Field != "id" {
			t.Errorf("bob %s %s: %d %s, want 404", c.method, c.path, resp.Status, resp.Body)
		}
	}
	if resp := e.call("alice", http.MethodGet, "/schedules/nope", nil); resp.Status != http.StatusBadRequest || resp.apiErr(t).Field != "id" {
		t.Errorf("bad id: %d %s", resp.Status, resp.Body)
	}
	e.callJSON("alice", http.MethodPost, "/schedules/"+sc.ID+"/pause", nil, http.StatusOK, &got)
	if !got.Paused {
		t.Errorf("pause answered %+v", got)
	}
	e.callJSON("alice", http.MethodPost, "/schedules/"+sc.ID+"/resume", nil, http.StatusOK, &got)
	if got.Paused {
		t.Errorf("resume answered %+v", got)
	}
	var runs control.RunList
	e.callJSON("alice", http.MethodGet, "/schedules/"+sc.ID+"/runs", nil, http.StatusOK, &runs)
	if len(runs.Runs) != 0 {
		t.Errorf("runs of an unfired schedule: %+v", runs)
	}
	if resp := e.call("alice", http.MethodDelete, "/schedules/"+sc.ID, nil); resp.Status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", resp.Status, resp.Body)
	}
	if resp := e.call("alice", http.MethodGet, "/schedules/"+sc.ID, nil); resp.Status != http.StatusNotFound {
		t.Errorf("get after delete: %d", resp.Status)
	}
}

// `batchwork schedule` against the runner's API: create from a file, list,
// pause, runs and delete, with --output json, and the exit codes of an
// invalid schedule (3) and an unknown one (4).
func TestCLISchedule(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	run := func(args ...string) (int, string, string) {
		var out, errb syncBuffer
		code := e.cliRun(ctx, "carol", &out, &errb, args...)
		return code, out.String(), errb.String()
	}
	dir := t.TempDir()
	good := dir + "/s.json"
	bad := dir + "/bad.json"
	if err := os.WriteFile(good, []byte(`{"name":"hourly","expression":"rate(1 hour)","spec":`+schedJobSpec+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"name":"hourly","expression":"0 * * * *","timeZone":"Nowhere/Else","spec":`+schedJobSpec+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errs := run("schedule", "create", good, "-o", "json")
	if code != 0 {
		t.Fatalf("create: exit %d: %s", code, errs)
	}
	var sc control.ScheduleView
	if err := json.Unmarshal([]byte(out), &sc); err != nil || !control.ScheduleIDPattern.MatchString(sc.ID) {
		t.Fatalf("create printed %q: %v", out, err)
	}
	if code, _, errs := run("schedule", "create", bad); code != 3 || !strings.Contains(errs, "timeZone") {
		t.Errorf("invalid schedule: exit %d, stderr %q; want 3 naming timeZone", code, errs)
	}
	if code, out, _ := run("schedule", "list"); code != 0 || !strings.Contains(out, sc.ID) || !strings.Contains(out, "rate(1 hour)") {
		t.Errorf("list: exit %d: %s", code, out)
	}
	if code, out, _ := run("schedule", "pause", sc.ID); code != 0 || !strings.Contains(out, "paused") {
		t.Errorf("pause: exit %d: %s", code, out)
	}
	if code, out, _ := run("schedule", "runs", sc.ID, "-o", "json"); code != 0 || !strings.Contains(out, `"runs"`) {
		t.Errorf("runs: exit %d: %s", code, out)
	}
	if code, _, errs := run("schedule", "delete", sc.ID); code != 0 {
		t.Errorf("delete: exit %d: %s", code, errs)
	}
	if code, _, _ := run("schedule", "get", sc.ID); code != 4 {
		t.Errorf("get after delete: exit %d, want 4", code)
	}
	if code, _, _ := run("schedule", "frobnicate"); code != 2 {
		t.Errorf("unknown action: exit %d, want 2", code)
	}
}

// A firing's job is created only if its schedule is as the firer read it:
// the guard is checked in the job's own transaction, so a schedule paused,
// resumed (its cursor moves) or deleted after the read gets no job, and
// nothing of the job is written (its idempotency key stays free).
func TestFiringGuard(t *testing.T) {
	r := newSchedRig(t)
	ctx := context.Background()
	store := r.e.r.Store
	sp, err := spec.Parse([]byte(schedJobSpec))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(owner, id string) error
		want   error
	}{
		{"unchanged", func(string, string) error { return nil }, nil},
		{"paused", func(o, id string) error { _, err := r.svc.PauseSchedule(ctx, o, id); return err }, dynamo.ErrCursorMoved},
		{"paused and resumed", func(o, id string) error {
			if _, err := r.svc.PauseSchedule(ctx, o, id); err != nil {
				return err
			}
			_, err := r.svc.ResumeSchedule(ctx, o, id)
			return err
		}, dynamo.ErrCursorMoved},
		{"deleted", func(o, id string) error { return r.svc.DeleteSchedule(ctx, o, id) }, dynamo.ErrCursorMoved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner := "guard-" + strings.ReplaceAll(tc.name, " ", "-")
			sc := r.create(owner, "")
			read, err := store.ScheduleGet(ctx, owner, sc.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.change(owner, sc.ID); err != nil {
				t.Fatal(err)
			}
			job := domain.Job{ID: control.NewJobID(), Owner: owner, Spec: sp, SpecHash: sp.Hash(), Created: r.clk.Now()}
			params := dynamo.CreateJobParams{Job: job, IdemKey: "firing", StageDue: r.clk.Now(), IdemTTL: time.Hour,
				Firing: &dynamo.FiringGuard{Owner: owner, ScheduleID: sc.ID, Cursor: read.Cursor}}
			id, created, err := store.JobCreate(ctx, params)
			if !errors.Is(err, tc.want) || created != (tc.want == nil) {
				t.Fatalf("CreateJob = %q, created %v, %v; want err %v", id, created, err, tc.want)
			}
			if tc.want == nil {
				return
			}
			if _, err := store.JobGet(ctx, job.ID); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("job of a refused firing: %v, want not found", err)
			}
			// The idempotency key was not taken: an unguarded create with
			// it makes a new job.
			params.Firing = nil
			if _, created, err := store.JobCreate(ctx, params); err != nil || !created {
				t.Fatalf("CreateJob without the guard: created %v, %v", created, err)
			}
		})
	}
}
