package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// request is what a test server received.
type request struct {
	Method, Path, Query, Body string
	Header                    http.Header
}

// recorder answers every request with the next of its answers (the last
// one repeats) and records it.
type recorder struct {
	mu      sync.Mutex
	got     []request
	answers []answer
}

type answer struct {
	status int
	body   string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	n := len(r.got)
	r.got = append(r.got, request{req.Method, req.URL.EscapedPath(), req.URL.RawQuery, string(body), req.Header.Clone()})
	a := r.answers[min(n, len(r.answers)-1)]
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, a.body)
}

func (r *recorder) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

// newTestClient is a client of a server giving answers, with retries that
// do not wait.
func newTestClient(t *testing.T, answers ...answer) (*Client, *recorder) {
	t.Helper()
	rec := &recorder{answers: answers}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL + "/prod")
	return &Client{Endpoint: u, HTTP: srv.Client(), Signer: LocalOwner{Owner: "alice"}, Retries: 2,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }}, rec
}

func ok(body string) answer { return answer{http.StatusOK, body} }

var t0 = time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)

// Each method sends its route's request (method, path, query, body and
// the headers it owns) and decodes the answer into its type.
func TestMethodsSendTheirRoutesRequest(t *testing.T) {
	t.Parallel()
	const id = "j19aa5e7c2a1f3b9d0e4c7"
	part := 3
	for _, tc := range []struct {
		name   string
		answer string
		call   func(context.Context, *Client) (any, error)
		want   request // Header: only the ones named are checked
		out    any
	}{
		{"Submit YAML", `{"jobId":"` + id + `","created":true}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.Submit(ctx, []byte("name: x\n"), SubmitOptions{IdempotencyKey: "k1"})
			},
			request{Method: "POST", Path: "/prod/jobs", Body: "name: x\n", Header: http.Header{"Idempotency-Key": {"k1"}, "Content-Type": {"application/yaml"}}},
			SubmitResult{JobID: id, Created: true}},
		{"Submit JSON", `{"jobId":"` + id + `","created":false}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.Submit(ctx, []byte(` {"name":"x"}`), SubmitOptions{IdempotencyKey: "k2"})
			},
			request{Method: "POST", Path: "/prod/jobs", Body: ` {"name":"x"}`, Header: http.Header{"Idempotency-Key": {"k2"}, "Content-Type": {"application/json"}}},
			SubmitResult{JobID: id}},
		{"SubmitSpec", `{"jobId":"` + id + `","created":true}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.SubmitSpec(ctx, &spec.Job{Name: "x", Stages: []spec.Stage{{Name: "s", Task: "t", Partitions: &spec.Partitions{Count: 2}}}}, SubmitOptions{IdempotencyKey: "k3"})
			},
			request{Method: "POST", Path: "/prod/jobs", Body: `{"name":"x","stages":[{"name":"s","task":"t","partitions":{"count":2}}]}`,
				Header: http.Header{"Idempotency-Key": {"k3"}, "Content-Type": {"application/json"}}},
			SubmitResult{JobID: id, Created: true}},
		{"Status", `{"id":"` + id + `","name":"wc","state":"RUNNING","created":"2026-11-21T10:00:00Z","progress":{"tasksDone":1,"tasksTotal":4,"recordsIn":0,"recordsOut":0},"stages":[]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Status(ctx, id) },
			request{Method: "GET", Path: "/prod/jobs/" + id},
			JobStatus{ID: id, Name: "wc", State: "RUNNING", Created: t0, Progress: Progress{TasksDone: 1, TasksTotal: 4}, Stages: []StageStatus{}}},
		{"Cancel", `{"id":"` + id + `","state":"CANCELLED"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Cancel(ctx, id) },
			request{Method: "POST", Path: "/prod/jobs/" + id + "/cancel"},
			JobStatus{ID: id, State: "CANCELLED"}},
		{"CancelTask", `{"jobId":"` + id + `","task":"map/3","stage":"map","partition":3,"state":"FAILED","tolerated":true,"error":"task map/3 cancelled by me","cancelled":"2026-11-21T10:00:00Z","jobState":"RUNNING"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.CancelTask(ctx, id, "map/3") },
			request{Method: "POST", Path: "/prod/jobs/" + id + "/cancel", Query: "task=map%2F3"},
			TaskCancellation{JobID: id, Task: "map/3", Stage: "map", Partition: 3, State: "FAILED", Tolerated: true,
				Error: "task map/3 cancelled by me", Cancelled: t0, JobState: "RUNNING"}},
		{"ListJobs", `{"jobs":[{"id":"` + id + `","name":"wc","state":"FAILED","created":"2026-11-21T10:00:00Z"}],"nextCursor":"c2"}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListJobs(ctx, JobsOptions{State: "FAILED", Name: "wc", Page: Page{Limit: 10, Cursor: "c1"}})
			},
			request{Method: "GET", Path: "/prod/jobs", Query: "cursor=c1&limit=10&name=wc&status=FAILED"},
			JobList{Jobs: []JobSummary{{ID: id, Name: "wc", State: "FAILED", Created: t0}}, NextCursor: "c2"}},
		{"ListJobs sends no empty parameter", `{"jobs":[]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.ListJobs(ctx, JobsOptions{}) },
			request{Method: "GET", Path: "/prod/jobs"},
			JobList{Jobs: []JobSummary{}}},
		{"ListTasks", `{"tasks":[{"id":"t","stage":"map","partition":3,"state":"FAILED","attempt":2,"maxAttempts":3,"updated":"2026-11-21T10:00:00Z","attempts":[{"attempt":1,"outcome":"retried"}],"checkpoint":{"attempt":1,"offset":9}}]}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListTasks(ctx, id, TasksOptions{Stage: "map", State: "FAILED", Page: Page{Limit: 5}})
			},
			request{Method: "GET", Path: "/prod/jobs/" + id + "/tasks", Query: "limit=5&stage=map&state=FAILED"},
			TaskList{Tasks: []Task{{ID: "t", Stage: "map", Partition: 3, State: "FAILED", Attempt: 2, MaxAttempts: 3, Updated: t0,
				Attempts: []Attempt{{Attempt: 1, Outcome: "retried"}}, Checkpoint: &TaskCheckpoint{Attempt: 1, Offset: 9}}}}},
		{"ListHistory", `{"events":[{"at":"2026-11-21T10:00:00Z","type":"task.retried","stage":"map","partition":3,"attempt":1}]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.ListHistory(ctx, id, Page{Cursor: "h1"}) },
			request{Method: "GET", Path: "/prod/jobs/" + id + "/history", Query: "cursor=h1"},
			History{Events: []Event{{At: t0, Type: "task.retried", Stage: "map", Partition: &part, Attempt: 1}}}},
		{"ListOutputs", `{"job":"` + id + `","state":"SUCCEEDED","complete":true,"bucket":"b","outputs":[{"stage":"d","partition":1,"attempt":1,"part":0,"key":"k","url":"https://u"}]}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListOutputs(ctx, id, OutputsOptions{Stage: "d", Presign: true})
			},
			request{Method: "GET", Path: "/prod/jobs/" + id + "/manifest", Query: "presign=true&stage=d"},
			OutputList{Job: id, State: "SUCCEEDED", Complete: true, Bucket: "b", Outputs: []Output{{Stage: "d", Partition: 1, Attempt: 1, Key: "k", URL: "https://u"}}}},
		{"ListBadRecords", `{"job":"` + id + `","records":[{"stage":"s","partition":0,"attempt":1,"offset":-1,"record":"r","reason":"bad"}],"counts":{"s":1}}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListBadRecords(ctx, id, BadRecordsOptions{Stage: "s"})
			},
			request{Method: "GET", Path: "/prod/jobs/" + id + "/bad-records", Query: "stage=s"},
			BadRecordPage{Job: id, Records: []BadRecord{{Stage: "s", Attempt: 1, Offset: -1, Record: "r", Reason: "bad"}}, Counts: map[string]int64{"s": 1}}},
		{"ListLogs", `{"lines":[{"time":"2026-11-21T10:00:00Z","fields":{"msg":"hi"}}],"next":"n1"}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListLogs(ctx, id, LogsOptions{Task: "count/3", Since: t0.In(time.FixedZone("x", 3600)), Page: Page{Limit: 1000, Cursor: "n0"}})
			},
			request{Method: "GET", Path: "/prod/jobs/" + id + "/logs", Query: "cursor=n0&limit=1000&since=2026-11-21T10%3A00%3A00Z&task=count%2F3"},
			LogPage{Lines: []LogLine{{Time: t0, Fields: json.RawMessage(`{"msg":"hi"}`)}}, Next: "n1"}},
		{"Redrive", `{"id":"` + id + `","state":"RUNNING","redrives":3}`,
			func(ctx context.Context, c *Client) (any, error) { return c.Redrive(ctx, id, 2) },
			request{Method: "POST", Path: "/prod/jobs/" + id + "/redrive", Body: `{"redrives":2}`, Header: http.Header{"Content-Type": {"application/json"}}},
			JobStatus{ID: id, State: "RUNNING", Redrives: 3}},
		{"Rerun from a stage", `{"jobId":"j2","created":true}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.Rerun(ctx, id, RerunOptions{From: "reduce", IdempotencyKey: "r1"})
			},
			request{Method: "POST", Path: "/prod/jobs/" + id + "/rerun", Body: `{"from":"reduce"}`, Header: http.Header{"Idempotency-Key": {"r1"}, "Content-Type": {"application/json"}}},
			SubmitResult{JobID: "j2", Created: true}},
		{"Rerun", `{"jobId":"j2","created":true}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.Rerun(ctx, id, RerunOptions{IdempotencyKey: "r2"})
			},
			request{Method: "POST", Path: "/prod/jobs/" + id + "/rerun", Body: `{}`, Header: http.Header{"Idempotency-Key": {"r2"}}},
			SubmitResult{JobID: "j2", Created: true}},
		{"DeleteJob", `{"job":"` + id + `","state":"SUCCEEDED","objects":3,"records":40,"complete":true}`,
			func(ctx context.Context, c *Client) (any, error) { return c.DeleteJob(ctx, id) },
			request{Method: "DELETE", Path: "/prod/jobs/" + id},
			JobDeletion{Job: id, State: "SUCCEEDED", Objects: 3, Records: 40, Complete: true}},
		{"DeleteData", `{"job":"` + id + `","state":"SUCCEEDED","dataDeleted":"2026-11-21T10:00:00Z","deleted":7,"complete":true}`,
			func(ctx context.Context, c *Client) (any, error) { return c.DeleteData(ctx, id) },
			request{Method: "DELETE", Path: "/prod/jobs/" + id + "/data"},
			DataDeletion{Job: id, State: "SUCCEEDED", DataDeleted: t0, Deleted: 7, Complete: true}},
		{"WhoAmI", `{"owner":"alice","ownerKey":"0f","inputs":"s3://b/inputs/0f/","inputBuckets":["x"]}`,
			func(ctx context.Context, c *Client) (any, error) { return c.WhoAmI(ctx) },
			request{Method: "GET", Path: "/prod/whoami"},
			Identity{Owner: "alice", OwnerKey: "0f", Inputs: "s3://b/inputs/0f/", InputBuckets: []string{"x"}}},
		{"CreateSchedule", `{"id":"s1","name":"n","spec":{"name":"x"},"expression":"@daily","createdAt":"2026-11-21T10:00:00Z"}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.CreateSchedule(ctx, []byte(`{"name":"n"}`))
			},
			request{Method: "POST", Path: "/prod/schedules", Body: `{"name":"n"}`, Header: http.Header{"Content-Type": {"application/json"}}},
			Schedule{ID: "s1", Name: "n", Spec: json.RawMessage(`{"name":"x"}`), Expression: "@daily", CreatedAt: t0}},
		{"GetSchedule", `{"id":"s1","name":"n","spec":null,"expression":"@daily","next":"2026-11-21T10:00:00Z"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.GetSchedule(ctx, "s1") },
			request{Method: "GET", Path: "/prod/schedules/s1"},
			Schedule{ID: "s1", Name: "n", Spec: json.RawMessage("null"), Expression: "@daily", Next: &t0}},
		{"PauseSchedule", `{"id":"s1","paused":true}`,
			func(ctx context.Context, c *Client) (any, error) { return c.PauseSchedule(ctx, "s1") },
			request{Method: "POST", Path: "/prod/schedules/s1/pause"},
			Schedule{ID: "s1", Paused: true}},
		{"ResumeSchedule", `{"id":"s1"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.ResumeSchedule(ctx, "s1") },
			request{Method: "POST", Path: "/prod/schedules/s1/resume"},
			Schedule{ID: "s1"}},
		{"DeleteSchedule", ``,
			func(ctx context.Context, c *Client) (any, error) { return nil, c.DeleteSchedule(ctx, "s1") },
			request{Method: "DELETE", Path: "/prod/schedules/s1"},
			nil},
		{"ListSchedules", `{"schedules":[{"id":"s1","name":"n","spec":{},"expression":"rate(5 minutes)"}],"nextCursor":"s1"}`,
			func(ctx context.Context, c *Client) (any, error) { return c.ListSchedules(ctx, Page{Limit: 1}) },
			request{Method: "GET", Path: "/prod/schedules", Query: "limit=1"},
			ScheduleList{Schedules: []Schedule{{ID: "s1", Name: "n", Spec: json.RawMessage(`{}`), Expression: "rate(5 minutes)"}}, NextCursor: "s1"}},
		{"ListScheduleRuns", `{"runs":[{"scheduled":"2026-11-21T10:00:00Z","action":"started","jobId":"j1","status":"SUCCEEDED"}]}`,
			func(ctx context.Context, c *Client) (any, error) {
				return c.ListScheduleRuns(ctx, "s1", Page{Cursor: "2026-11-22T00:00:00Z"})
			},
			request{Method: "GET", Path: "/prod/schedules/s1/runs", Query: "cursor=2026-11-22T00%3A00%3A00Z"},
			RunList{Runs: []ScheduleRun{{Scheduled: t0, Action: "started", JobID: "j1", Status: "SUCCEEDED"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, rec := newTestClient(t, ok(tc.answer))
			got, err := tc.call(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if tc.out != nil && !reflect.DeepEqual(got, tc.out) {
				t.Errorf("decoded\n %#v\nwant\n %#v", got, tc.out)
			}
			reqs := rec.requests()
			if len(reqs) != 1 {
				t.Fatalf("%d requests, want 1", len(reqs))
			}
			r := reqs[0]
			if r.Method != tc.want.Method || r.Path != tc.want.Path || r.Query != tc.want.Query || r.Body != tc.want.Body {
				t.Errorf("sent %s %s ? %s body %q\nwant %s %s ? %s body %q", r.Method, r.Path, r.Query, r.Body, tc.want.Method, tc.want.Path, tc.want.Query, tc.want.Body)
			}
			for k, vs := range tc.want.Header {
				if got := r.Header.Values(k); !reflect.DeepEqual(got, vs) {
					t.Errorf("header %s: %q, want %q", k, got, vs)
				}
			}
			if got := r.Header.Get(OwnerHeader); got != "alice" {
				t.Errorf("owner header %q", got)
			}
		})
	}
}

// A submission without a key gets a fresh one, the same on every retry
// of the call, so the retries never make two jobs.
func TestSubmitKeepsItsKeyAcrossRetries(t *testing.T) {
	t.Parallel()
	c, rec := newTestClient(t, answer{http.StatusBadGateway, `{"message":"Bad Gateway"}`}, ok(`{"jobId":"j1","created":true}`))
	if _, err := c.Submit(t.Context(), []byte("{}"), SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	reqs := rec.requests()
	k0, k1 := reqs[0].Header.Get("Idempotency-Key"), reqs[1].Header.Get("Idempotency-Key")
	if len(reqs) != 2 || k0 == "" || k0 != k1 {
		t.Fatalf("keys %q, %q over %d requests", k0, k1, len(reqs))
	}
	if _, err := c.Submit(t.Context(), []byte("{}"), SubmitOptions{}); err != nil {
		t.Fatal(err)
	}
	if k2 := rec.requests()[2].Header.Get("Idempotency-Key"); k2 == k0 {
		t.Fatalf("two submissions share the key %q", k2)
	}
}

// collect reads an iterator to its end or its first error.
func collect[T any](seq iter.Seq2[T, error]) ([]T, error) {
	var out []T
	for v, err := range seq {
		if err != nil {
			return out, err
		}
		out = append(out, v)
	}
	return out, nil
}

// The iterators follow the pages' cursors to the end, from the cursor
// given, and stop asking when the caller stops.
func TestIteratorsFollowPages(t *testing.T) {
	t.Parallel()
	c, rec := newTestClient(t,
		ok(`{"jobs":[{"id":"a"},{"id":"b"}],"nextCursor":"c1"}`),
		ok(`{"jobs":[{"id":"c"}],"nextCursor":"c2"}`),
		ok(`{"jobs":[]}`))
	jobs, err := collect(c.Jobs(t.Context(), JobsOptions{State: "RUNNING", Page: Page{Limit: 2, Cursor: "c0"}}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	if strings.Join(ids, ",") != "a,b,c" {
		t.Fatalf("jobs %v", ids)
	}
	var queries []string
	for _, r := range rec.requests() {
		queries = append(queries, r.Query)
	}
	want := []string{"cursor=c0&limit=2&status=RUNNING", "cursor=c1&limit=2&status=RUNNING", "cursor=c2&limit=2&status=RUNNING"}
	if !reflect.DeepEqual(queries, want) {
		t.Fatalf("queries %q, want %q", queries, want)
	}

	c, rec = newTestClient(t, ok(`{"tasks":[{"id":"t1"},{"id":"t2"}],"nextCursor":"x"}`))
	for task, err := range c.Tasks(t.Context(), "j1", TasksOptions{}) {
		if err != nil || task.ID != "t1" {
			t.Fatalf("first task %v, %v", task.ID, err)
		}
		break
	}
	if n := len(rec.requests()); n != 1 {
		t.Fatalf("a loop that stopped at the first task made %d requests", n)
	}
}

// Every list has an iterator over the same route as its page method.
func TestEveryListIterates(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, path, page string
		count            func(*Client) (int, error)
	}{
		{"History", "/prod/jobs/j1/history", `{"events":[{"type":"x"}]}`, func(c *Client) (int, error) { return count(c.History(context.Background(), "j1", Page{})) }},
		{"Outputs", "/prod/jobs/j1/manifest", `{"outputs":[{"key":"x"}]}`, func(c *Client) (int, error) { return count(c.Outputs(context.Background(), "j1", OutputsOptions{})) }},
		{"BadRecords", "/prod/jobs/j1/bad-records", `{"records":[{"record":"x"}]}`, func(c *Client) (int, error) {
			return count(c.BadRecords(context.Background(), "j1", BadRecordsOptions{}))
		}},
		{"Schedules", "/prod/schedules", `{"schedules":[{"id":"s"}]}`, func(c *Client) (int, error) { return count(c.Schedules(context.Background(), Page{})) }},
		{"ScheduleRuns", "/prod/schedules/s1/runs", `{"runs":[{"action":"started"}]}`, func(c *Client) (int, error) {
			return count(c.ScheduleRuns(context.Background(), "s1", Page{}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			next := strings.Replace(tc.page, "}]", `}],"nextCursor":"n1"`, 1)
			c, rec := newTestClient(t, ok(next), ok(tc.page))
			n, err := tc.count(c)
			if err != nil || n != 2 {
				t.Fatalf("%d items, %v; want 2", n, err)
			}
			reqs := rec.requests()
			if len(reqs) != 2 || reqs[0].Path != tc.path || reqs[1].Query != "cursor=n1" {
				t.Fatalf("requests %+v", reqs)
			}
		})
	}
}

func count[T any](seq iter.Seq2[T, error]) (int, error) {
	all, err := collect(seq)
	return len(all), err
}

// Logs reads pages until one brings no line: the cursor of the last page
// is also the cursor of lines not written yet.
func TestLogsEndsAtAnEmptyPage(t *testing.T) {
	t.Parallel()
	c, rec := newTestClient(t,
		ok(`{"lines":[{"time":"2026-11-21T10:00:00Z","fields":{"msg":"a"}}],"next":"n1"}`),
		ok(`{"lines":[],"next":"n1"}`))
	lines, err := collect(c.Logs(t.Context(), "j1", LogsOptions{Task: "s/0"}))
	if err != nil || len(lines) != 1 || string(lines[0].Fields) != `{"msg":"a"}` {
		t.Fatalf("lines %+v, %v", lines, err)
	}
	if reqs := rec.requests(); len(reqs) != 2 || reqs[1].Query != "cursor=n1&task=s%2F0" {
		t.Fatalf("requests %+v", reqs)
	}
}

// Result reads every page into one list whose other fields are the last
// page's.
func TestResultJoinsThePages(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t,
		ok(`{"job":"j1","state":"RUNNING","bucket":"b","outputs":[{"key":"k1"}],"nextCursor":"p2"}`),
		ok(`{"job":"j1","state":"SUCCEEDED","complete":true,"bucket":"b","outputs":[{"key":"k2"}]}`))
	l, err := c.Result(t.Context(), "j1", OutputsOptions{})
	if err != nil || len(l.Outputs) != 2 || l.Outputs[1].Key != "k2" || !l.Complete || l.State != "SUCCEEDED" || l.NextCursor != "" {
		t.Fatalf("result %+v, %v", l, err)
	}
}

// Watch yields the job's first status, each change and its end, polling
// at the interval; with EveryPoll, every status read.
func TestWatchYieldsChangesUntilTheEnd(t *testing.T) {
	t.Parallel()
	running := `{"id":"j1","state":"RUNNING","progress":{"tasksDone":%d}}`
	answers := []answer{
		ok(strings.Replace(running, "%d", "0", 1)),
		ok(strings.Replace(running, "%d", "0", 1)),
		ok(strings.Replace(running, "%d", "1", 1)),
		ok(`{"id":"j1","state":"SUCCEEDED","progress":{"tasksDone":2}}`),
	}
	for _, every := range []bool{false, true} {
		c, rec := newTestClient(t, answers...)
		var slept []time.Duration
		c.Sleep = func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }
		var done []int
		for st, err := range c.Watch(t.Context(), "j1", WatchOptions{Interval: 5 * time.Second, EveryPoll: every}) {
			if err != nil {
				t.Fatal(err)
			}
			done = append(done, st.Progress.TasksDone)
		}
		want := []int{0, 1, 2}
		if every {
			want = []int{0, 0, 1, 2}
		}
		if !reflect.DeepEqual(done, want) || len(rec.requests()) != 4 || len(slept) != 3 || slept[0] != 5*time.Second {
			t.Fatalf("every %v: yielded %v, want %v; %d requests, slept %v", every, done, want, len(rec.requests()), slept)
		}
	}
}

// Watch ends with ctx's error when ctx ends between polls.
func TestWatchHonoursContext(t *testing.T) {
	t.Parallel()
	c, _ := newTestClient(t, ok(`{"id":"j1","state":"RUNNING"}`))
	ctx, cancel := context.WithCancel(t.Context())
	c.Sleep = func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }
	n := 0
	var last error
	for _, err := range c.Watch(ctx, "j1", WatchOptions{}) {
		n++
		last = err
	}
	if n != 2 || !errors.Is(last, context.Canceled) {
		t.Fatalf("%d yields, last error %v", n, last)
	}
}

// The API's error answers match the kinds callers act on.
func TestErrorKinds(t *testing.T) {
	t.Parallel()
	kinds := []error{ErrInvalid, ErrUnauthorized, ErrNotFound, ErrConflict, ErrEnded, ErrRunning, ErrDataDeleted, ErrThrottled, ErrUnavailable}
	for _, tc := range []struct {
		status int
		body   string
		want   []error
	}{
		{400, `{"code":"invalid_spec","message":"2 problems","field":"stages","errors":[{"field":"stages[0].name","message":"required","line":3}]}`, []error{ErrInvalid}},
		{400, `{"code":"invalid_request","message":"must be positive","field":"limit"}`, []error{ErrInvalid}},
		{413, `{"code":"too_large","message":"spec is larger than 256 KiB","field":"body"}`, []error{ErrInvalid}},
		{401, `{"code":"unauthenticated","message":"no caller identity","field":""}`, []error{ErrUnauthorized}},
		{403, `{"message":"User is not authorized to access this resource"}`, []error{ErrUnauthorized}},
		{404, `{"code":"not_found","message":"no such job","field":"id"}`, []error{ErrNotFound}},
		{409, `{"code":"job_ended","message":"job is SUCCEEDED","field":"id"}`, []error{ErrConflict, ErrEnded}},
		{409, `{"code":"job_publishing","message":"job is PUBLISHING","field":"id"}`, []error{ErrConflict, ErrEnded}},
		{409, `{"code":"job_running","message":"job is RUNNING","field":"id"}`, []error{ErrConflict, ErrRunning}},
		{409, `{"code":"idempotency_conflict","message":"reused","field":"Idempotency-Key"}`, []error{ErrConflict}},
		{409, `{"code":"reused_by","message":"reused","field":"id","reusedBy":["j2"]}`, []error{ErrConflict}},
		{410, `{"code":"data_deleted","message":"deleted","field":"id"}`, []error{ErrDataDeleted}},
		{429, `{"code":"quota","message":"too many jobs","field":""}`, []error{ErrThrottled}},
		{501, `{"code":"logs_unavailable","message":"no logs","field":""}`, []error{ErrUnavailable}},
		{500, `{"code":"internal","message":"internal error","field":""}`, nil},
	} {
		c, rec := newTestClient(t, answer{tc.status, tc.body})
		_, err := c.Status(t.Context(), "j1")
		var ae *APIError
		if !errors.As(err, &ae) || ae.Status != tc.status {
			t.Fatalf("%d: error %v", tc.status, err)
		}
		for _, k := range kinds {
			if got, want := errors.Is(err, k), slices.Contains(tc.want, k); got != want {
				t.Errorf("%d %s: errors.Is(%v) = %v, want %v", tc.status, ae.Code, k, got, want)
			}
		}
		if ae.Code == CodeInvalidSpec && (len(ae.Errors) != 1 || ae.Errors[0].Line != 3) {
			t.Errorf("spec errors %+v", ae.Errors)
		}
		if ae.Code == CodeReusedBy && !reflect.DeepEqual(ae.ReusedBy, []string{"j2"}) {
			t.Errorf("reusedBy %v", ae.ReusedBy)
		}
		if tries := len(rec.requests()); (tc.status == 429) != (tries == 3) {
			t.Errorf("%d: %d tries", tc.status, tries)
		}
	}
}

// DeleteJob calls until nothing is left and sums what the calls deleted;
// a 404 after a call that may have done the deletion is the job gone, a
// 404 first is no such job, and calls that delete nothing stop it.
func TestDeleteJobCallsUntilDone(t *testing.T) {
	t.Parallel()
	part := `{"job":"j1","state":"SUCCEEDED","objects":3,"records":40,"complete":false}`
	done := `{"job":"j1","state":"SUCCEEDED","objects":1,"records":2,"complete":true}`
	for _, tc := range []struct {
		name    string
		answers []answer
		want    JobDeletion
		err     error
	}{
		{"two calls", []answer{{202, part}, ok(done)}, JobDeletion{Job: "j1", State: "SUCCEEDED", Objects: 4, Records: 42, Complete: true}, nil},
		{"no such job", []answer{{404, `{"code":"not_found","message":"no such job"}`}}, JobDeletion{}, ErrNotFound},
		{"answer lost, then gone", []answer{{504, `{"message":"Gateway Timeout"}`}, {404, `{"code":"not_found","message":"no such job"}`}}, JobDeletion{Job: "j1", Complete: true}, nil},
		{"a call, then another caller finished", []answer{{202, part}, {404, `{"code":"not_found","message":"no such job"}`}},
			JobDeletion{Job: "j1", State: "SUCCEEDED", Objects: 3, Records: 40, Complete: true}, nil},
		{"no progress", []answer{{202, `{"job":"j1","state":"SUCCEEDED","complete":false}`}}, JobDeletion{}, ErrNoProgress},
	} {
		c, _ := newTestClient(t, tc.answers...)
		got, err := c.DeleteJob(t.Context(), "j1")
		if !errors.Is(err, tc.err) || (tc.err == nil && err != nil) || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
}
