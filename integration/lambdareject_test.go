package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdatask"
	sm "github.com/batchwork/batchwork/statemachine"
)

// rejectingFunction plays a lambda stage's function in process (Lambda
// cannot run here; the executor reaches it through its lambdatask.Invoker):
// it writes one line to its output and answers with Params["n"] made-up
// rejections (record "p<partition> attempt <attempt> record <i>" at
// offset 10*i), or with the response Params["raw"] when set.
type rejectingFunction struct{ e *env }

func (f rejectingFunction) Invoke(ctx context.Context, function string, payload []byte) ([]byte, string, error) {
	var ev lambdatask.Event
	if err := json.Unmarshal(payload, &ev); err != nil {
		return nil, "", err
	}
	if raw := ev.Params["raw"]; raw != "" {
		return []byte(raw), "", nil
	}
	n, err := strconv.Atoi(ev.Params["n"])
	if err != nil {
		return nil, "", fmt.Errorf("param n: %w", err)
	}
	if err := f.e.r.Blob.PutIfAbsent(ctx, ev.Outputs[0], []byte(fmt.Sprintf("p%d\n", ev.Task.Partition))); err != nil {
		return nil, "", err
	}
	resp := lambdatask.Response{Outputs: []lambdatask.Output{{Part: 0, Key: ev.Outputs[0]}}}
	for i := range n {
		off := int64(10 * i)
		resp.Rejects = append(resp.Rejects, lambdatask.Reject{
			Record: fmt.Sprintf("p%d attempt %d record %d", ev.Task.Partition, ev.Task.Attempt, i), Reason: "made up", Offset: &off})
	}
	raw, err := json.Marshal(resp)
	return raw, "", err
}

// A lambda stage's function rejects records in its response: they are
// committed with the attempt, listed by the bad-records API and
// `batchwork result --bad-records` with their task and offset, and
// counted against the stage's maxBadRecords; past it the task fails at
// once (no retry) and so does the job, naming the limit. A malformed
// rejection fails the attempt naming the entry and the problem, and
// none of that response's rejections is kept.
func TestLambdaStageRejectsRecords(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &control.Config{
		StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second,
		TaskFunctions: []string{"rejecter"},
	}})
	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(),
		Lambda: rejectingFunction{e}}
	// Three attempts, so that a failure without a retry is the limit's.
	spec := func(name string, attempts, max int, params ...string) []byte {
		return fmt.Appendf(nil, `{"name":%q,"retry":{"maxAttempts":%d,"backoff":"1ms"},"stages":[{"name":"l","lambda":"rejecter",`+
			`"maxBadRecords":%d,"partitions":{"count":%d,"params":[%s]}}]}`, name, attempts, max, len(params), strings.Join(params, ","))
	}
	within := e.submit("within", spec("within", 3, 3, `{"n":"2"}`, `{"n":"1"}`))
	over := e.submit("over", spec("over", 3, 2, `{"n":"3"}`))
	badRaw, _ := json.Marshal(`{"outputs":[],"rejects":[{"record":"a","reason":"r"},{"record":"b","reason":"r","offset":-5}]}`)
	malformed := e.submit("malformed", spec("malformed", 1, 5, `{"raw":`+string(badRaw)+`}`))
	work(t, e, run)

	ctx := context.Background()
	st := wantSucceeded(t, e.r.Service, within)
	if n := st.Stages[0].BadRecords; n != 3 {
		t.Errorf("status: %d bad records, want 3", n)
	}
	pg, err := e.r.Service.BadRecords(ctx, control.BadRecordsRequest{Owner: "tester", ID: within})
	if err != nil {
		t.Fatal(err)
	}
	if len(pg.Records) != 3 || pg.Counts["l"] != 3 {
		t.Fatalf("bad records %+v: want 3", pg)
	}
	var got []string
	for _, r := range pg.Records {
		got = append(got, fmt.Sprintf("%s %d %d %d %s %s", r.Stage, r.Partition, r.Attempt, r.Offset, r.Reason, r.Record))
	}
	slices.Sort(got)
	want := []string{
		"l 0 1 0 made up p0 attempt 1 record 0",
		"l 0 1 10 made up p0 attempt 1 record 1",
		"l 1 1 0 made up p1 attempt 1 record 0",
	}
	if !slices.Equal(got, want) {
		t.Errorf("bad records:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var out, errOut syncBuffer
	if code := e.cliRun(ctx, "tester", &out, &errOut, "result", within, "--bad-records"); code != 0 {
		t.Fatalf("result --bad-records: exit %d: %s", code, errOut.String())
	}
	for _, rec := range []string{"p0 attempt 1 record 0", "p0 attempt 1 record 1", "p1 attempt 1 record 0"} {
		if !strings.Contains(out.String(), "made up  "+strconv.Quote(rec)) {
			t.Errorf("result --bad-records lacks %q:\n%s", rec, out.String())
		}
	}
	if !strings.Contains(errOut.String(), "stage l: 3 bad records") {
		t.Errorf("result --bad-records stderr: %s", errOut.String())
	}

	st = jobState(t, e.r.Service, over)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "task rejected 3 records; stage allows 2 (maxBadRecords)") {
		t.Fatalf("over the limit: job %s (%s), want FAILED naming the limit", st.State, st.Error)
	}
	if tasks := stageTasks(t, e, over, 0); len(tasks) != 1 || tasks[0].State != sm.TaskFailed || tasks[0].Attempt != 1 {
		t.Errorf("task %+v, want FAILED on attempt 1 (no retry)", tasks)
	}

	st = jobState(t, e.r.Service, malformed)
	if st.State != string(sm.JobFailed) || !strings.Contains(st.Error, "response rejects[1]: offset -5 is negative") {
		t.Fatalf("malformed rejection: job %s (%s), want FAILED naming rejects[1]'s offset", st.State, st.Error)
	}
	if st.Stages[0].BadRecords != 0 {
		t.Errorf("malformed rejection: %d bad records counted", st.Stages[0].BadRecords)
	}
}
