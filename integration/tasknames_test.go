package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/iamrec"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// checkedTimings are the test timings with task names checked at submit,
// as the api function, the sweep and the local runner check them.
func checkedTimings() *control.Config {
	return &control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second, CheckTaskNames: true}
}

// tablePKs returns the partition keys of every item in the env's table.
func tablePKs(t *testing.T, e *env) []string {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).Scan(context.Background(), &dynamodb.ScanInput{TableName: &e.r.Resources.Table})
	if err != nil {
		t.Fatal(err)
	}
	var pks []string
	for _, it := range out.Items {
		if pk, ok := it["pk"].(*types.AttributeValueMemberS); ok {
			pks = append(pks, pk.Value)
		}
	}
	slices.Sort(pks)
	return pks
}

// A spec naming a task no executor published is a 400 naming the field
// and listing the known names, and writes nothing; once an executor (a
// separate process) has published, its names are accepted at once, and
// so is a retry of the refused submission under the same key.
func TestTaskNamesCheckedAtSubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{controlOnly: true, control: checkedTimings()})
	misspelled := []byte(`{"name":"wc","stages":[{"name":"map","task":"wordcount.mapp","partitions":{"count":1}}]}`)
	fixed := []byte(`{"name":"wc","stages":[{"name":"map","task":"wordcount.map","partitions":{"count":1}}]}`)

	// No executor has started: nothing is known, and the error says why.
	r := e.call("tester", http.MethodPost, "/jobs", misspelled, "Idempotency-Key", "k1")
	ae := r.apiErr(t)
	if r.Status != http.StatusBadRequest || ae.Code != "invalid_spec" || ae.Field != "stages[0].task" ||
		!strings.Contains(ae.Message, `unknown task "wordcount.mapp": no executor has published its task names yet`) {
		t.Fatalf("before any executor: %d %+v; want a 400 naming stages[0].task, saying no executor has published", r.Status, ae)
	}

	// An executor process starts and publishes what it runs, with its own
	// control plane over the same table (as internal/host does).
	log := newLogCounter().logger()
	exec := control.New(control.Config{Queues: e.r.Resources.Queues}, e.r.Store, e.r.Queue, e.r.Blob, log)
	ctx := iamrec.WithFunction(context.Background(), iamrec.FnExecutor)
	names := []string{"wordcount.reduce", "diamond.a", "wordcount.map"}
	if err := exec.PublishTaskNames(ctx, names); err != nil {
		t.Fatalf("publish: %v", err)
	}
	// Publishing again (the next start) is harmless.
	if err := exec.PublishTaskNames(ctx, names[:2]); err != nil {
		t.Fatalf("publish again: %v", err)
	}
	before := tablePKs(t, e)
	if !slices.Equal(before, []string{"TASKNAMES"}) {
		t.Fatalf("table holds %v before any job, want the task catalog only", before)
	}

	// The API's copy of the catalog is a second old, and lacks these
	// names: the miss reads again, so the list is complete.
	r = e.call("tester", http.MethodPost, "/jobs", misspelled, "Idempotency-Key", "k1")
	var body struct {
		Code   string            `json:"code"`
		Field  string            `json:"field"`
		Errors []spec.FieldError `json:"errors"`
	}
	ae = r.apiErr(t)
	if err := json.Unmarshal(r.Body, &body); err != nil {
		t.Fatal(err)
	}
	want := `unknown task "wordcount.mapp"; known tasks: diamond.a, wordcount.map, wordcount.reduce`
	if r.Status != http.StatusBadRequest || ae.Field != "stages[0].task" || len(body.Errors) != 1 ||
		body.Errors[0].Field != "stages[0].task" || body.Errors[0].Message != want {
		t.Fatalf("misspelled task: %d %s; want a 400 with stages[0].task: %s", r.Status, r.Body, want)
	}
	// Nothing was written: no job, no idempotency record.
	if after := tablePKs(t, e); !slices.Equal(after, before) {
		t.Fatalf("a refused spec wrote items: %v", after)
	}
	var list control.JobList
	e.callJSON("tester", http.MethodGet, "/jobs", nil, http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("jobs after a refused submit: %+v", list.Jobs)
	}

	// The corrected spec under the same key creates the job (the key was
	// never recorded with the misspelled spec).
	var res control.SubmitResult
	e.callJSON("tester", http.MethodPost, "/jobs", fixed, http.StatusCreated, &res, "Idempotency-Key", "k1")
	if !res.Created || res.JobID == "" {
		t.Fatalf("corrected submit: %+v, want a created job", res)
	}

	// Schedules are checked when created, under the document's spec field.
	sched := []byte(`{"name":"nightly","expression":"30 2 * * *","spec":` + string(misspelled) + `}`)
	r = e.call("tester", http.MethodPost, "/schedules", sched, "Content-Type", "application/json")
	ae = r.apiErr(t)
	if r.Status != http.StatusBadRequest || ae.Field != "spec.stages[0].task" || !strings.Contains(ae.Message, want) {
		t.Fatalf("schedule with a misspelled task: %d %+v; want a 400 naming spec.stages[0].task", r.Status, ae)
	}
}

// The local runner publishes its own executor's names when it starts, so
// its first submission is checked against them.
func TestRunnerPublishesTaskNames(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	for _, n := range []string{"local.b", "local.a"} {
		reg.Register(n, func(context.Context, *batchwork.Task) error { return nil })
	}
	e := newEnv(t, reg, envOptions{noRun: true, control: checkedTimings()})
	got, err := e.r.Store.CatalogTaskNames(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []string{"local.a", "local.b"}) {
		t.Fatalf("catalog after the runner started: %v, want its registry's names", got)
	}
	e.submitAs("tester", "ok", []byte(`{"name":"j","stages":[{"name":"s","task":"local.a","partitions":{"count":1}}]}`))
	r := e.call("tester", http.MethodPost, "/jobs", []byte(`{"name":"j","stages":[{"name":"s","task":"local.c","partitions":{"count":1}}]}`),
		"Idempotency-Key", "bad")
	ae := r.apiErr(t)
	if r.Status != http.StatusBadRequest || ae.Field != "stages[0].task" || !strings.Contains(ae.Message, "known tasks: local.a, local.b") {
		t.Fatalf("unknown task on the runner: %d %+v", r.Status, ae)
	}
	// Stages that run a program or a Lambda function are not checked
	// against task names (whether they may run is checked elsewhere).
	for _, stage := range []string{`"exec":["wc.py"]`, `"lambda":"my-function"`} {
		r := e.call("tester", http.MethodPost, "/jobs", []byte(`{"name":"j","stages":[{"name":"s",`+stage+`,"partitions":{"count":1}}]}`),
			"Idempotency-Key", "x-"+stage[1:5])
		if r.Status == http.StatusBadRequest {
			var ae struct{ Field, Message string }
			_ = json.Unmarshal(r.Body, &ae)
			if strings.HasSuffix(ae.Field, ".task") || strings.Contains(ae.Message, "unknown task") {
				t.Errorf("%s stage refused as an unknown task: %s", stage, r.Body)
			}
		}
	}
}

// A schedule created before task names were checked, naming a task no
// executor runs, is not fired into a job that would fail every attempt:
// each firing is recorded as skipped with the reason, and the schedule
// (and every other schedule's watermark) moves on. Once an executor
// publishes the name, the next firing starts a job.
func TestScheduleFiringOfUnknownTask(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	sc := r.create("alice", "") // task "t", unchecked: r.svc has no check
	cfg := testTimings
	cfg.CheckTaskNames = true
	// The rig's firer checks from now on.
	r.svc = newService(r.e, cfg, r.e.r.Store, r.e.r.Queue, r.clk, newLogCounter().logger())
	r.at(time.Second)
	r.fireUntilCaughtUp()
	runs := r.runs("alice", sc.ID)
	if len(runs) != 1 || runs[0].Action != "skipped" || runs[0].JobID != "" ||
		!strings.Contains(runs[0].Note, `stages[0].task: unknown task "t": no executor has published`) {
		t.Fatalf("runs %+v, want one skipped run saying stages[0].task is unknown", runs)
	}
	if jobs := r.jobs("alice"); len(jobs) != 0 {
		t.Fatalf("jobs %+v, want none", jobs)
	}

	ctx := iamrec.WithFunction(context.Background(), iamrec.FnExecutor)
	if err := newService(r.e, testTimings, r.e.r.Store, r.e.r.Queue, r.clk, newLogCounter().logger()).PublishTaskNames(ctx, []string{"t"}); err != nil {
		t.Fatal(err)
	}
	r.at(time.Hour + time.Second)
	r.fireUntilCaughtUp()
	if got := r.runSummary(r.runs("alice", sc.ID)); !slices.Equal(got, []string{"skipped@0s", "started@1h0m0s"}) {
		t.Fatalf("runs %v", got)
	}
}

// A schedule whose lambda stage's function the operator has since stopped
// allowing (control.Config.TaskFunctions) cannot fire into a job, and no
// retry changes that. As for a task no executor runs, the firing is
// recorded as skipped, with why, and the schedule moves on: a firing that
// kept erring would hold the sweep's shared watermark at that minute, and
// after fireMinutes (30, shared/control/schedules) minutes FireDue would no longer query the later
// minutes, so every owner's schedules would stop firing from the sweep.
// Any permanent refusal at firing (a field or validation error, an input
// bucket no longer allowed, a job alone over its owner's quota) is
// handled so (schedules.RefusedForGood).
func TestScheduleOfDelistedFunctionIsSkipped(t *testing.T) {
	t.Parallel()
	r := newSchedRig(t)
	allowed := testTimings
	allowed.TaskFunctions = []string{"report-fn"}
	r.svc = newService(r.e, allowed, r.e.r.Store, r.e.r.Queue, r.clk, newLogCounter().logger())
	body := `{"name":"hourly","expression":"0 * * * *","spec":` +
		`{"name":"report","stages":[{"name":"s","lambda":"report-fn","partitions":{"count":1}}]}}`
	sc, err := r.svc.CreateSchedule(context.Background(), "alice", []byte(body))
	if err != nil {
		t.Fatalf("create schedule: %v", err)
	}
	// Another owner's ordinary hourly schedule.
	bob := r.create("bob", `,"overlap":"allow"`)
	// The operator removes the function from TaskFunctions (a redeploy).
	r.svc = newService(r.e, testTimings, r.e.r.Store, r.e.r.Queue, r.clk, newLogCounter().logger())
	var firstErr error
	for _, at := range []time.Duration{time.Second, time.Hour + time.Second} {
		r.at(at)
		for range 40 {
			if _, err := r.svc.FireDue(context.Background(), r.clk.Now()); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	if firstErr != nil {
		t.Fatalf("FireDue: %v; want the refused firings recorded, not retried", firstErr)
	}
	if got := r.runSummary(r.runs("bob", bob.ID)); !slices.Equal(got, []string{"started@0s", "started@1h0m0s"}) {
		t.Errorf("bob's hourly schedule fired %v by h0+1h, want its 0s and 1h runs", got)
	}
	runs := r.runs("alice", sc.ID)
	if got := r.runSummary(runs); !slices.Equal(got, []string{"skipped@0s", "skipped@1h0m0s"}) {
		t.Fatalf("alice's runs %v, want both firings skipped", got)
	}
	for _, run := range runs {
		if run.JobID != "" || !strings.Contains(run.Note, "not started: ") || !strings.Contains(run.Note, "stages[0].lambda") {
			t.Errorf("run %+v: want no job and a note naming stages[0].lambda", run)
		}
	}
	if jobs := r.jobs("alice"); len(jobs) != 0 {
		t.Errorf("alice's jobs %+v, want none", jobs)
	}
}

// Exec programs are checked at submit as task names are: the local
// runner publishes the programs of its exec directory when it starts
// (executable files with program names only), a spec naming one of them
// runs, and one naming any other program is a 400 naming
// stages[i].exec[0] and listing the known programs, for a job and for a
// schedule's spec alike.
func TestExecProgramsCheckedAtSubmit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, mode := range map[string]os.FileMode{"upper.sh": 0o755, "notes.txt": 0o644} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\ntr a-z A-Z\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{control: checkedTimings(), execDir: dir})
	known := []byte(`{"name":"up","stages":[{"name":"s","exec":["upper.sh"],"partitions":{"count":1}}]}`)
	unknown := []byte(`{"name":"up","stages":[{"name":"s","exec":["notes.txt"],"partitions":{"count":1}}]}`)

	r := e.call("tester", http.MethodPost, "/jobs", unknown, "Idempotency-Key", "k1")
	ae := r.apiErr(t)
	if r.Status != http.StatusBadRequest || ae.Field != "stages[0].exec[0]" ||
		!strings.Contains(ae.Message, `unknown program "notes.txt"; known programs: upper.sh`) {
		t.Fatalf("unknown program: %d %+v; want a 400 on stages[0].exec[0] listing upper.sh", r.Status, ae)
	}
	sched := []byte(`{"name":"hourly","expression":"0 * * * *","spec":` + string(unknown) + `}`)
	r = e.call("tester", http.MethodPost, "/schedules", sched, "Content-Type", "application/json")
	if ae := r.apiErr(t); r.Status != http.StatusBadRequest || ae.Field != "spec.stages[0].exec[0]" {
		t.Fatalf("schedule of an unknown program: %d %+v; want a 400 on spec.stages[0].exec[0]", r.Status, ae)
	}
	id := e.submit("up", known)
	if st := e.waitJob(id, time.Minute); st.State != "SUCCEEDED" {
		t.Fatalf("job of a published program: %+v", st)
	}
}
