package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
	sm "github.com/batchwork/batchwork/statemachine"
)

// apiResp is one response of the runner's HTTP API.
type apiResp struct {
	Status int
	Body   []byte
	Header http.Header
}

// apiErr decodes an error body.
func (r apiResp) apiErr(t *testing.T) api.Error {
	t.Helper()
	var e api.Error
	dec := json.NewDecoder(bytes.NewReader(r.Body))
	if err := dec.Decode(&e); err != nil || e.Code == "" || e.Message == "" {
		t.Fatalf("status %d: body %q is not an API error: %v", r.Status, r.Body, err)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error content type %q, want application/json", ct)
	}
	return e
}

// call sends a request to the runner's API as owner ("" sends no identity).
func (e *env) call(owner, method, path string, body []byte, header ...string) apiResp {
	e.t.Helper()
	req, err := http.NewRequest(method, e.r.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	if owner != "" {
		req.Header.Set(runner.OwnerHeader, owner)
	}
	localauth.SetHeader(req, e.r.Token)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := apiResp{Status: resp.StatusCode, Body: b, Header: resp.Header}
	if checkContract != nil {
		checkContract(e.t, req, r)
	}
	return r
}

// checkContract, when set (go test -tags contract), validates every
// response of these tests against the OpenAPI document.
var checkContract func(t *testing.T, req *http.Request, r apiResp)

// callJSON calls and decodes a 2xx JSON body into out, failing otherwise.
func (e *env) callJSON(owner, method, path string, body []byte, want int, out any, header ...string) {
	e.t.Helper()
	r := e.call(owner, method, path, body, header...)
	if r.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	if out != nil {
		// Decode into a zero value: a field the response leaves out must
		// not keep the previous response's value.
		v := reflect.ValueOf(out).Elem()
		v.Set(reflect.Zero(v.Type()))
		dec := json.NewDecoder(bytes.NewReader(r.Body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(out); err != nil {
			e.t.Fatalf("%s %s: decode %s: %v", method, path, r.Body, err)
		}
	}
}

func (e *env) submitAs(owner, key string, specBody []byte) string {
	e.t.Helper()
	var res control.SubmitResult
	e.callJSON(owner, http.MethodPost, "/jobs", specBody, http.StatusCreated, &res, "Idempotency-Key", key)
	return res.JobID
}

// waitJobAs is waitJob for another owner.
func (e *env) waitJobAs(owner, id string, within time.Duration) control.JobStatus {
	e.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var st control.JobStatus
		e.callJSON(owner, http.MethodGet, "/jobs/"+id, nil, http.StatusOK, &st)
		if st.State != string(sm.JobRunning) && st.State != string(sm.JobPublishing) {
			return st
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s still RUNNING after %s: %+v", id, within, st)
		}
		time.Sleep(50 * time.Millisecond) // polling an external system
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(50 * time.Millisecond) // polling an external system
	}
}

func TestAPIRoutes(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	diamond.Register(reg, nil)
	e := newEnv(t, reg, envOptions{})
	const alice = "arn:aws:iam::111122223333:user/alice"

	// POST /jobs: JSON or YAML; the same key returns the same job.
	id := e.submitAs(alice, "routes-1", diamond.Spec("routes", 3))
	var again control.SubmitResult
	e.callJSON(alice, http.MethodPost, "/jobs", diamond.Spec("routes", 3), http.StatusOK, &again, "Idempotency-Key", "routes-1")
	if again.JobID != id || again.Created {
		t.Fatalf("same key: got %+v, want job %s not created", again, id)
	}
	jsonID := e.submitAs(alice, "routes-2", []byte(`{"name":"other","stages":[{"name":"s","task":"diamond.step","partitions":{"count":2}}]}`))
	conflict := e.call(alice, http.MethodPost, "/jobs", diamond.Spec("changed", 3), "Idempotency-Key", "routes-1")
	if conflict.Status != http.StatusConflict || conflict.apiErr(t).Field != "Idempotency-Key" {
		t.Fatalf("same key, other spec: %d %s", conflict.Status, conflict.Body)
	}

	st := e.waitJobAs(alice, id, time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	e.waitJobAs(alice, jsonID, time.Minute)

	// GET /jobs/{id}: progress from the counters, times, records.
	if st.Progress.TasksDone != 12 || st.Progress.TasksTotal != 12 || st.Started == nil || st.Ended == nil || st.Manifest == "" {
		t.Errorf("status %+v: want 12/12 tasks, start, end and manifest", st)
	}
	for _, s := range st.Stages {
		if s.Committed != 3 || s.Attempts != 3 || s.Failures != 0 || s.RecordsOut != 3 || s.Started == nil || s.Ended == nil {
			t.Errorf("stage %+v: want 3 committed in 3 attempts, 3 records out, times", s)
		}
	}

	// GET /jobs: newest first, filters, pages.
	var list control.JobList
	e.callJSON(alice, http.MethodGet, "/jobs", nil, http.StatusOK, &list)
	if got := jobIDs(list); !slices.Equal(got, []string{jsonID, id}) {
		t.Fatalf("list %v, want [%s %s] (newest first)", got, jsonID, id)
	}
	e.callJSON(alice, http.MethodGet, "/jobs?name=routes&status=SUCCEEDED", nil, http.StatusOK, &list)
	if got := jobIDs(list); !slices.Equal(got, []string{id}) || list.Jobs[0].Ended == nil {
		t.Fatalf("list by name: %+v", list)
	}
	e.callJSON(alice, http.MethodGet, "/jobs?status=RUNNING", nil, http.StatusOK, &list)
	if len(list.Jobs) != 0 {
		t.Fatalf("no job is RUNNING, list gave %+v", list)
	}
	var page1, page2 control.JobList
	e.callJSON(alice, http.MethodGet, "/jobs?limit=1", nil, http.StatusOK, &page1)
	if len(page1.Jobs) != 1 || page1.NextCursor == "" {
		t.Fatalf("first page %+v: want one job and a cursor", page1)
	}
	e.callJSON(alice, http.MethodGet, "/jobs?limit=1&cursor="+url.QueryEscape(page1.NextCursor), nil, http.StatusOK, &page2)
	if len(page2.Jobs) != 1 || page2.Jobs[0].ID != id {
		t.Fatalf("second page %+v: want job %s", page2, id)
	}

	// GET /jobs/{id}/tasks: every task once over the pages, with filters.
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		var tl control.TaskList
		path := "/jobs/" + id + "/tasks?limit=5"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		e.callJSON(alice, http.MethodGet, path, nil, http.StatusOK, &tl)
		for _, tk := range tl.Tasks {
			seen = append(seen, tk.ID)
			if tk.State != "SUCCEEDED" || len(tk.Attempts) != 1 || tk.Attempts[0].Outcome != control.OutcomeCommitted || tk.Outputs != 1 || tk.RecordsOut != 1 {
				t.Errorf("task %+v: want SUCCEEDED with one committed attempt, one output, one record", tk)
			}
		}
		if cursor = tl.NextCursor; cursor == "" {
			break
		}
		if pages > 10 {
			t.Fatal("tasks pages do not end")
		}
	}
	if len(seen) != 12 || len(slices.Compact(slices.Sorted(slices.Values(seen)))) != 12 {
		t.Fatalf("pages listed %d tasks %v, want the 12 once each", len(seen), seen)
	}
	var tl control.TaskList
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/tasks?stage=c&state=SUCCEEDED", nil, http.StatusOK, &tl)
	if len(tl.Tasks) != 3 || tl.Tasks[0].Stage != "c" || tl.NextCursor != "" {
		t.Fatalf("tasks of stage c: %+v", tl)
	}
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/tasks?state=FAILED", nil, http.StatusOK, &tl)
	if len(tl.Tasks) != 0 {
		t.Fatalf("no task failed, got %+v", tl)
	}

	// GET /jobs/{id}/history: the lifecycle in order.
	var h control.History
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/history", nil, http.StatusOK, &h)
	types := make([]string, len(h.Events))
	for i, ev := range h.Events {
		types[i] = ev.Type
		if i > 0 && ev.At.Before(h.Events[i-1].At) {
			t.Errorf("event %d (%s at %s) is before event %d", i, ev.Type, ev.At, i-1)
		}
	}
	if len(types) != 10 || types[0] != "job.submitted" || types[1] != "stage.started" || h.Events[1].Stage != "a" ||
		types[len(types)-1] != "job.succeeded" || strings.Count(strings.Join(types, " "), "stage.completed") != 4 {
		t.Fatalf("history %v", types)
	}
	var h1, h2 control.History
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/history?limit=4", nil, http.StatusOK, &h1)
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/history?limit=100&cursor="+url.QueryEscape(h1.NextCursor), nil, http.StatusOK, &h2)
	if len(h1.Events) != 4 || len(h2.Events) != 6 || h2.NextCursor != "" || h2.Events[0].Type != types[4] {
		t.Fatalf("history pages of 4 then the rest: %d %d %q", len(h1.Events), len(h2.Events), h2.NextCursor)
	}

	// GET /jobs/{id}/manifest: the manifest, with URLs that work.
	var out control.OutputList
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/manifest?presign=true", nil, http.StatusOK, &out)
	if !out.Complete || len(out.Outputs) != 3 || out.Outputs[0].Stage != "d" || out.URLExpires == nil {
		t.Fatalf("manifest %+v: want the 3 outputs of d", out)
	}
	body := fetch(t, out.Outputs[0].URL)
	if !strings.HasPrefix(string(body), "d/0 attempt 1") {
		t.Fatalf("presigned output %q", body)
	}
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/manifest?stage=a&limit=2", nil, http.StatusOK, &out)
	if out.Complete || len(out.Outputs) != 2 || out.Outputs[0].Stage != "a" || out.NextCursor == "" {
		t.Fatalf("stage a's outputs, first page: %+v", out)
	}
	e.callJSON(alice, http.MethodGet, "/jobs/"+id+"/manifest?stage=a&limit=2&cursor="+url.QueryEscape(out.NextCursor), nil, http.StatusOK, &out)
	if len(out.Outputs) != 1 || out.Outputs[0].Partition != 2 || out.NextCursor != "" {
		t.Fatalf("stage a's outputs, second page: %+v", out)
	}

	// POST /jobs/{id}/cancel on a finished job: 409 with a clear message.
	r := e.call(alice, http.MethodPost, "/jobs/"+id+"/cancel", nil)
	if ae := r.apiErr(t); r.Status != http.StatusConflict || ae.Code != "job_ended" || !strings.Contains(ae.Message, "SUCCEEDED") {
		t.Fatalf("cancel a finished job: %d %s", r.Status, r.Body)
	}

	// Unknown routes and methods answer JSON errors too.
	if r := e.call(alice, http.MethodGet, "/nope", nil); r.Status != http.StatusNotFound || r.apiErr(t).Code != "not_found" {
		t.Fatalf("unknown route: %d %s", r.Status, r.Body)
	}
	if r := e.call(alice, http.MethodPut, "/jobs/"+id, nil); r.Status != http.StatusMethodNotAllowed ||
		!strings.Contains(r.Header.Get("Allow"), "GET") || !strings.Contains(r.Header.Get("Allow"), "DELETE") {
		t.Fatalf("PUT a job: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := e.call(alice, http.MethodGet, "/openapi.yaml", nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, api.OpenAPI) {
		t.Fatalf("openapi.yaml: %d", r.Status)
	}
}

func jobIDs(l control.JobList) []string {
	ids := make([]string, len(l.Jobs))
	for i, j := range l.Jobs {
		ids[i] = j.ID
	}
	return ids
}

func fetch(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, b)
	}
	return b
}

// Another owner's job does not exist for them: every route answers 404,
// lists leave it out, and their cancel changes nothing.
func TestOwnerIsolation(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	diamond.Register(reg, nil)
	e := newEnv(t, reg, envOptions{noRun: true})
	const alice, bob = "alice", "bob"
	id := e.submitAs(alice, "mine", diamond.Spec("secret", 1))
	bobs := e.submitAs(bob, "mine", diamond.Spec("bobs", 1)) // the same key is per owner
	if bobs == id {
		t.Fatal("two owners' equal keys gave one job")
	}
	for _, rt := range []struct{ method, path string }{
		{http.MethodGet, "/jobs/" + id},
		{http.MethodGet, "/jobs/" + id + "/tasks"},
		{http.MethodGet, "/jobs/" + id + "/history"},
		{http.MethodGet, "/jobs/" + id + "/manifest"},
		{http.MethodGet, "/jobs/" + id + "/manifest?presign=true"},
		{http.MethodPost, "/jobs/" + id + "/cancel"},
	} {
		r := e.call(bob, rt.method, rt.path, nil)
		if r.Status != http.StatusNotFound || r.apiErr(t).Message != "no such job" {
			t.Errorf("bob %s %s: %d %s, want 404", rt.method, rt.path, r.Status, r.Body)
		}
		// The answer is the same as for a job that never existed.
		ghost := strings.Replace(rt.path, id, "j000000000000000000000", 1)
		if g := e.call(bob, rt.method, ghost, nil); g.Status != r.Status || !bytes.Equal(g.Body, r.Body) {
			t.Errorf("bob %s: %d %s for alice's job but %d %s for none", rt.path, r.Status, r.Body, g.Status, g.Body)
		}
		if r := e.call("", rt.method, rt.path, nil); r.Status != http.StatusUnauthorized {
			t.Errorf("no identity %s %s: %d", rt.method, rt.path, r.Status)
		}
	}
	var list control.JobList
	e.callJSON(bob, http.MethodGet, "/jobs", nil, http.StatusOK, &list)
	if got := jobIDs(list); !slices.Equal(got, []string{bobs}) {
		t.Fatalf("bob lists %v, want only his job %s", got, bobs)
	}
	var st control.JobStatus
	e.callJSON(alice, http.MethodGet, "/jobs/"+id, nil, http.StatusOK, &st)
	if st.State != string(sm.JobRunning) {
		t.Fatalf("bob's cancel reached alice's job: %s", st.State)
	}
	// A cursor of alice's list is not a cursor of bob's.
	e.submitAs(alice, "second", diamond.Spec("second", 1))
	e.callJSON(alice, http.MethodGet, "/jobs?limit=1", nil, http.StatusOK, &list)
	if r := e.call(bob, http.MethodGet, "/jobs?limit=1&cursor="+url.QueryEscape(list.NextCursor), nil); r.Status != http.StatusBadRequest || r.apiErr(t).Field != "cursor" {
		t.Fatalf("bob with alice's cursor: %d %s", r.Status, r.Body)
	}
}

// Bad inputs get a 4xx naming what to fix, and write nothing: no item, no
// message, no object.
func TestBadInputsWriteNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	big := append([]byte("name: big\nstages: []\n#"), bytes.Repeat([]byte("x"), api.MaxBody)...)
	cases := []struct {
		name, method, path string
		body               string
		header             []string
		status             int
		code, field        string
	}{
		{"malformed JSON", "POST", "/jobs", `{"name": "x", "stages": [`, nil, 400, "invalid_spec", ""},
		{"malformed YAML", "POST", "/jobs", "name: x\nstages:\n  - {name: a\n", nil, 400, "invalid_spec", ""},
		{"unknown field", "POST", "/jobs", `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1},"colour":"red"}]}`, nil, 400, "invalid_spec", "stages[0].colour"},
		{"cycle", "POST", "/jobs", "name: c\nstages:\n  - {name: a, task: t, after: [b], partitions: {count: 1}}\n  - {name: b, task: t, after: [a], partitions: {count: 1}}\n", nil, 400, "invalid_spec", "stages[0].after"},
		{"oversized body", "POST", "/jobs", string(big), nil, 413, "too_large", "body"},
		{"empty body", "POST", "/jobs", "", nil, 400, "invalid_spec", ""},
		{"no idempotency key", "POST", "/jobs", `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`, []string{"Idempotency-Key", ""}, 400, "invalid_request", "Idempotency-Key"},
		{"invalid id", "GET", "/jobs/not-a-job", "", nil, 400, "invalid_request", "id"},
		{"invalid id on cancel", "POST", "/jobs/j123/cancel", "", nil, 400, "invalid_request", "id"},
		{"invalid id on tasks", "GET", "/jobs/J0000000000000000000000/tasks", "", nil, 400, "invalid_request", "id"},
		{"unknown status", "GET", "/jobs?status=DONE", "", nil, 400, "invalid_request", "status"},
		{"unknown parameter", "GET", "/jobs?stauts=FAILED", "", nil, 400, "invalid_request", "stauts"},
		{"bad limit", "GET", "/jobs?limit=many", "", nil, 400, "invalid_request", "limit"},
		{"limit too large", "GET", "/jobs?limit=100000", "", nil, 400, "invalid_request", "limit"},
		{"garbage cursor", "GET", "/jobs?cursor=%21%21", "", nil, 400, "invalid_request", "cursor"},
		{"unknown job", "GET", "/jobs/j000000000000000000000/history", "", nil, 404, "not_found", "id"},
		{"cancel unknown job", "POST", "/jobs/j000000000000000000000/cancel", "", nil, 404, "not_found", "id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			header := tc.header
			if header == nil {
				header = []string{"Idempotency-Key", "bad-" + tc.name}
			}
			r := e.call("tester", tc.method, tc.path, []byte(tc.body), header...)
			ae := r.apiErr(t)
			if r.Status != tc.status || ae.Code != tc.code || !strings.HasPrefix(ae.Field, tc.field) {
				t.Fatalf("got %d %+v; want %d %s naming %q", r.Status, ae, tc.status, tc.code, tc.field)
			}
			if strings.Contains(ae.Message, "dynamodb") || strings.Contains(ae.Message, "operation error") {
				t.Fatalf("message leaks an internal error: %q", ae.Message)
			}
		})
	}
	assertEmpty(t, e)
}

// A cursor only continues the query that made it.
func TestCursorFromAnotherQuery(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	diamond.Register(reg, nil)
	e := newEnv(t, reg, envOptions{noRun: true})
	a := e.submitAs("tester", "a", diamond.Spec("a", 3))
	b := e.submitAs("tester", "b", diamond.Spec("b", 3))
	var jobs control.JobList
	e.callJSON("tester", http.MethodGet, "/jobs?limit=1", nil, http.StatusOK, &jobs)
	var tasks control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+a+"/tasks?limit=1", nil, http.StatusOK, &tasks)
	var hist control.History
	e.callJSON("tester", http.MethodGet, "/jobs/"+a+"/history?limit=1", nil, http.StatusOK, &hist)
	if jobs.NextCursor == "" || tasks.NextCursor == "" || hist.NextCursor == "" {
		t.Fatalf("want cursors: %q %q %q", jobs.NextCursor, tasks.NextCursor, hist.NextCursor)
	}
	q := url.QueryEscape
	for _, path := range []string{
		"/jobs?limit=1&status=RUNNING&cursor=" + q(jobs.NextCursor),       // same route, other filter
		"/jobs/" + b + "/tasks?limit=1&cursor=" + q(tasks.NextCursor),     // other job
		"/jobs/" + a + "/tasks?state=READY&cursor=" + q(tasks.NextCursor), // other filter
		"/jobs/" + a + "/history?cursor=" + q(tasks.NextCursor),           // other route
		"/jobs/" + a + "/tasks?cursor=" + q(hist.NextCursor),
		"/jobs?cursor=" + q(hist.NextCursor),
	} {
		r := e.call("tester", http.MethodGet, path, nil)
		if r.Status != http.StatusBadRequest || r.apiErr(t).Field != "cursor" {
			t.Errorf("GET %s: %d %s, want 400 naming cursor", path, r.Status, r.Body)
		}
	}
	// The right query continues.
	e.callJSON("tester", http.MethodGet, "/jobs/"+a+"/tasks?limit=1&cursor="+q(tasks.NextCursor), nil, http.StatusOK, &tasks)
	if len(tasks.Tasks) != 1 || tasks.Tasks[0].Partition != 1 {
		t.Fatalf("second page %+v", tasks)
	}
}

// Cancelling a job while its tasks run: no task starts afterwards, running
// tasks see their context cancelled at their next heartbeat, queued
// messages are dropped, committed outputs are kept and listed, and the
// cancel is idempotent.
func TestCancelWhileTasksRun(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	var mu sync.Mutex
	var cancelled time.Time
	started := map[int]time.Time{}
	stopped := map[int]error{}
	running := make(chan int, 16)
	reg.Register("slow", func(ctx context.Context, tk *batchwork.Task) error {
		mu.Lock()
		started[tk.Partition] = time.Now()
		first := len(started) <= 2
		mu.Unlock()
		if first {
			// The first two tasks to run commit at once.
			_, err := fmt.Fprintf(tk.Out, "early %d\n", tk.Partition)
			return err
		}
		running <- tk.Partition
		select {
		case <-ctx.Done():
			mu.Lock()
			stopped[tk.Partition] = context.Cause(ctx)
			mu.Unlock()
			return ctx.Err()
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("never cancelled")
		}
	})
	// Two slots: two tasks commit, two more block, four stay queued.
	e := newEnv(t, reg, envOptions{noRun: true})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	p := e.r.Poller()
	p.Slots = 2
	go func() { defer func() { done <- struct{}{} }(); _ = p.Run(runCtx) }()
	go func() {
		defer func() { done <- struct{}{} }()
		for runCtx.Err() == nil {
			_, _ = e.r.Service.Sweep(runCtx)
			select {
			case <-runCtx.Done():
			case <-time.After(300 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done; <-done })
	id := e.submitAs("tester", "cancel", []byte(`{"name":"cancel","lease":"3s","stages":[
	  {"name":"s","task":"slow","partitions":{"count":8}},
	  {"name":"after","task":"slow","after":["s"],"partitions":{"count":2}}]}`))
	for range 2 {
		select {
		case <-running:
		case <-time.After(time.Minute):
			t.Fatal("tasks did not start")
		}
	}
	var st control.JobStatus
	waitFor(t, time.Minute, "two commits and a rate", func() bool {
		e.callJSON("tester", http.MethodGet, "/jobs/"+id, nil, http.StatusOK, &st)
		return st.Stages[0].Committed == 2 && st.ETA != nil && st.Stages[0].TasksPerSec != nil
	})
	if st.Stages[0].ETA == nil || st.Progress.TasksPerSec == nil || *st.Stages[0].TasksPerSec <= 0 || !st.ETA.After(time.Now().Add(-time.Second)) {
		t.Errorf("running stage: want a positive rate and an ETA, got %+v", st.Stages[0])
	}

	e.callJSON("tester", http.MethodPost, "/jobs/"+id+"/cancel", nil, http.StatusOK, &st)
	mu.Lock()
	cancelled = time.Now()
	mu.Unlock()
	if st.State != string(sm.JobCancelled) || st.Stages[0].State != string(sm.StageCancelled) || st.Stages[1].State != string(sm.StageCancelled) {
		t.Fatalf("after cancel: %+v", st)
	}
	var again control.JobStatus
	e.callJSON("tester", http.MethodPost, "/jobs/"+id+"/cancel", nil, http.StatusOK, &again)
	if again.State != string(sm.JobCancelled) || !again.Ended.Equal(*st.Ended) {
		t.Fatalf("second cancel: %+v, want the same CANCELLED job", again)
	}

	// Every task ends: the two commits stay, the rest are cancelled (the
	// running ones once their leases lapse, the queued ones when received).
	ctx := context.Background()
	waitFor(t, time.Minute, "every task to end", func() bool {
		tasks, err := e.r.Store.TaskListStage(ctx, id, 0, 8)
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range tasks {
			if !sm.Tasks.IsTerminal(tk.State) {
				return false
			}
		}
		return true
	})
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/tasks", nil, http.StatusOK, &tl)
	states := map[string]int{}
	for _, tk := range tl.Tasks {
		states[tk.State]++
	}
	if states["SUCCEEDED"] != 2 || states["CANCELLED"] != 6 {
		t.Fatalf("task states %v, want 2 SUCCEEDED and 6 CANCELLED", states)
	}
	mu.Lock()
	for part, at := range started {
		if at.After(cancelled) {
			t.Errorf("task %d started at %s, after the cancel at %s", part, at, cancelled)
		}
	}
	for part, cause := range stopped {
		if cause == nil || !strings.Contains(cause.Error(), "job no longer running") {
			t.Errorf("task %d: context ended with %v, want the job's end", part, cause)
		}
	}
	if len(stopped) != 2 {
		t.Errorf("%d running tasks saw their context cancelled, want 2", len(stopped))
	}
	mu.Unlock()
	// Queued messages are dropped when received, not left to come back.
	sq := sqs.NewFromConfig(e.cfg)
	waitFor(t, time.Minute, "the ready queue to empty", func() bool {
		out, err := sq.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: &e.r.Resources.Queues.Normal,
			AttributeNames: []sqstypes.QueueAttributeName{
				sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return out.Attributes["ApproximateNumberOfMessages"] == "0" && out.Attributes["ApproximateNumberOfMessagesNotVisible"] == "0"
	})

	// The committed outputs are kept and listed.
	var out control.OutputList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/manifest?presign=true", nil, http.StatusOK, &out)
	if out.Complete || out.State != "CANCELLED" || len(out.Outputs) != 2 {
		t.Fatalf("outputs of the cancelled job: %+v", out)
	}
	for _, o := range out.Outputs {
		if got := string(fetch(t, o.URL)); got != fmt.Sprintf("early %d\n", o.Partition) {
			t.Errorf("output %s: %q", o.Key, got)
		}
	}
	var h control.History
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/history", nil, http.StatusOK, &h)
	i := slices.IndexFunc(h.Events, func(ev control.Event) bool { return ev.Type == "job.cancelled" })
	if i < 0 || !strings.Contains(h.Events[i].Message, "cancelled") || !h.Events[i].At.Equal(*st.Ended) {
		t.Fatalf("history %+v: want job.cancelled at %s", h.Events, st.Ended)
	}
	for _, ev := range h.Events[i+1:] {
		if ev.Type != "stage.cancelled" {
			t.Errorf("after the cancel the timeline has %+v; want only stages cancelled", ev)
		}
	}
}

// Failures, retries and records reach the status, the task's attempt
// history and the timeline; the records of a word count add up.
func TestProgressRetriesAndRecords(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	var mu sync.Mutex
	failed := false
	reg.Register("flaky", func(ctx context.Context, tk *batchwork.Task) error {
		mu.Lock()
		defer mu.Unlock()
		if !failed && tk.Partition == 1 {
			failed = true
			return fmt.Errorf("transient: try again")
		}
		_, err := fmt.Fprintf(tk.Out, "a\nb\n")
		return err
	})
	e := newEnv(t, reg, envOptions{})
	text := "the cat\nthe dog\nthe end\n"
	e.putInput("tester", "in/a.txt", []byte(text))
	wc := e.submitAs("tester", "wc", wordcount.Spec("wc", "inputs:in/", 1<<20, 2))
	flaky := e.submitAs("tester", "flaky", []byte(`{"name":"flaky","retry":{"maxAttempts":3,"backoff":"100ms"},
	  "stages":[{"name":"s","task":"flaky","partitions":{"count":3}}]}`))
	st := e.waitJobAs("tester", wc, time.Minute)
	if st.State != "SUCCEEDED" || st.Progress.RecordsIn != 3 || st.Progress.RecordsOut != 4 {
		t.Fatalf("word count: %s, %d records in (want 3 lines), %d out (want 4 words)", st.State, st.Progress.RecordsIn, st.Progress.RecordsOut)
	}
	st = e.waitJobAs("tester", flaky, time.Minute)
	s := st.Stages[0]
	if st.State != "SUCCEEDED" || s.Committed != 3 || s.Failures != 1 || s.Attempts != 4 || s.RecordsOut != 6 {
		t.Fatalf("flaky stage %+v: want 3 committed, 1 failure in 4 attempts, 6 records out", s)
	}
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+flaky+"/tasks?limit=1&cursor="+url.QueryEscape(firstTaskCursor(t, e, flaky)), nil, http.StatusOK, &tl)
	tk := tl.Tasks[0]
	if tk.Partition != 1 || len(tk.Attempts) != 2 || tk.Attempts[0].Outcome != control.OutcomeRetried ||
		!strings.Contains(tk.Attempts[0].Error, "transient") || tk.Attempts[1].Outcome != control.OutcomeCommitted {
		t.Fatalf("task 1's attempts %+v: want retried (with its error) then committed", tk)
	}
	var h control.History
	e.callJSON("tester", http.MethodGet, "/jobs/"+flaky+"/history", nil, http.StatusOK, &h)
	i := slices.IndexFunc(h.Events, func(ev control.Event) bool { return ev.Type == "task.retried" })
	if i < 0 || h.Events[i].Attempt != 1 || h.Events[i].Partition == nil || *h.Events[i].Partition != 1 || h.Events[i].Stage != "s" {
		t.Fatalf("history %+v: want task.retried for s/1 attempt 1", h.Events)
	}
}

func firstTaskCursor(t *testing.T, e *env, id string) string {
	t.Helper()
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/tasks?limit=1", nil, http.StatusOK, &tl)
	return tl.NextCursor
}

// countingTransport counts DynamoDB requests while armed, and notes any
// that touch a task record.
type countingTransport struct {
	next  http.RoundTripper
	mu    sync.Mutex
	armed bool
	ops   map[string]int
	tasks int
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	armed := c.armed
	c.mu.Unlock()
	if armed && r.Body != nil {
		body, _ := io.ReadAll(r.Body)
		r.Body.Close()
		r.Body = io.NopCloser(bytes.NewReader(body))
		op := r.Header.Get("X-Amz-Target")
		c.mu.Lock()
		if op != "" {
			c.ops[op[strings.LastIndex(op, ".")+1:]]++
		}
		if bytes.Contains(body, []byte(`"TASK#`)) {
			c.tasks++
		}
		c.mu.Unlock()
	}
	return c.next.RoundTrip(r)
}

func (c *countingTransport) measure(f func()) (map[string]int, int) {
	c.mu.Lock()
	c.armed, c.ops, c.tasks = true, map[string]int{}, 0
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	return c.ops, c.tasks
}

// The status of a job reads aggregates, never its tasks: a stage of 1,000
// tasks costs what a stage of 3 does.
func TestStatusDoesNotReadTasks(t *testing.T) {
	t.Parallel()
	ct := &countingTransport{}
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, transport: func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }})
	ctx := context.Background()
	cost := map[int]int{}
	for _, n := range []int{3, 1000} {
		id := e.submit(fmt.Sprintf("big-%d", n), fmt.Appendf(nil, `{"name":"big","stages":[{"name":"s","task":"t","partitions":{"count":%d}}]}`, n))
		var st control.JobStatus
		ops, taskReads := ct.measure(func() {
			var err error
			if st, err = e.r.Service.Status(ctx, "tester", id); err != nil {
				t.Fatal(err)
			}
		})
		if st.Stages[0].Total != n || taskReads != 0 {
			t.Fatalf("%d tasks: status %+v read task records %d times", n, st.Stages[0], taskReads)
		}
		for op, k := range ops {
			cost[n] += k
			if op == "Scan" || (op == "Query" && k > 1) {
				t.Errorf("%d tasks: status made %d %s requests", n, k, op)
			}
		}
		t.Logf("status of a stage of %d tasks: %v", n, ops)
	}
	if cost[1000] != cost[3] {
		t.Fatalf("status requests: %d for 3 tasks, %d for 1,000", cost[3], cost[1000])
	}
}

// An executor that dies mid-task loses its lease; the next claim takes the
// task over. The task's attempt history, the timeline and the stage's
// failure count say so.
func TestExpiredLeaseInAttemptHistory(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	id := e.submitAs("tester", "lease", []byte(`{"name":"lease","lease":"2s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`))
	// The first executor receives the message, claims, and dies.
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Normal, 1, 2*time.Second, 2*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	mustClaim(t, e.r.Service, domain.TaskRef{Job: id, Stage: 0, Partition: 0})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.r.Poller().Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	st := e.waitJobAs("tester", id, time.Minute)
	if st.State != "SUCCEEDED" || st.Stages[0].Failures != 1 || st.Stages[0].Attempts != 2 {
		t.Fatalf("job %s, stage %+v: want SUCCEEDED with 1 failure in 2 attempts", st.State, st.Stages[0])
	}
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/tasks", nil, http.StatusOK, &tl)
	if a := tl.Tasks[0].Attempts; len(a) != 2 || a[0].Outcome != control.OutcomeLeaseExpired || a[0].At == nil || a[1].Outcome != control.OutcomeCommitted {
		t.Fatalf("attempts %+v: want lease_expired then committed", a)
	}
	var h control.History
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/history", nil, http.StatusOK, &h)
	if !slices.ContainsFunc(h.Events, func(ev control.Event) bool { return ev.Type == "task.lease_expired" && ev.Attempt == 1 }) {
		t.Fatalf("history %+v: want task.lease_expired for attempt 1", h.Events)
	}
}
