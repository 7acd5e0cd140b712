package cli

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
)

const logsJob = "j0123456789a0123456789"

// logsAPI is an API with one job of the caller's (logsJob, stages count
// and sum) whose lines come in pages: each logs request gets the next
// page of pages, and the job ends after endAfter status reads.
type logsAPI struct {
	mu       sync.Mutex
	pages    [][]string
	served   int
	statuses int
	endAfter int
	requests []string
}

func (f *logsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.URL.RequestURI())
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/jobs/" + logsJob:
		f.statuses++
		state := "RUNNING"
		if f.endAfter > 0 && f.statuses > f.endAfter {
			state = "SUCCEEDED"
		}
		fmt.Fprintf(w, `{"id":%q,"name":"wc","state":%q,"created":"2026-11-21T10:00:00Z","progress":{"tasksDone":0,"tasksTotal":3},"stages":[{"name":"count","state":"RUNNING"},{"name":"sum","state":"BLOCKED"}]}`, logsJob, state)
	case "/jobs/" + logsJob + "/logs":
		var lines []string
		if f.served < len(f.pages) {
			lines = f.pages[f.served]
		}
		f.served++
		fmt.Fprintf(w, `{"lines":[%s],"next":"f%d"}`, strings.Join(lines, ","), f.served)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"code":"not_found","message":"no such job","field":"id"}`)
	}
}

func logLine(sec int, fields string) string {
	t := time.Date(2026, 11, 21, 10, 0, sec, 0, time.UTC).Format(time.RFC3339Nano)
	return fmt.Sprintf(`{"time":%q,"fields":{"time":%q,"level":"INFO","job_id":%q%s}}`, t, t, logsJob, fields)
}

var (
	lineSubmitted = logLine(0, `,"msg":"job submitted","tasks":3`)
	lineClaimed   = logLine(1, `,"msg":"task claimed","stage":0,"partition":1,"task":"`+logsJob+`/0/1","attempt":2,"executor_id":"0af3","stage_name":"count"`)
	lineUser      = logLine(2, `,"msg":"counted words","task":"`+logsJob+`/1/0","attempt":1,"executor_id":"b7","words":12,"file":"a b.txt"`)
)

func TestLogsCommand(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		args     []string
		pages    [][]string
		endAfter int
		code     int
		want     string   // stdout
		wantReq  []string // substrings of the requests, in order
	}{{
		name:  "a job's lines, its task's named by stage, attempt and executor",
		args:  []string{"logs", logsJob},
		pages: [][]string{{lineSubmitted, lineClaimed, lineUser}},
		want: "2026-11-21 10:00:00.000 INFO  - job submitted tasks=3\n" +
			"2026-11-21 10:00:01.000 INFO  count/1#2@0af3 task claimed\n" +
			"2026-11-21 10:00:02.000 INFO  sum/0#1@b7 counted words file=\"a b.txt\" words=12\n",
		wantReq: []string{"/jobs/" + logsJob, "/jobs/" + logsJob + "/logs?limit=1000"},
	}, {
		name:    "one task",
		args:    []string{"logs", logsJob, "--task", "count/1"},
		pages:   [][]string{{lineClaimed}},
		want:    "2026-11-21 10:00:01.000 INFO  count/1#2@0af3 task claimed\n",
		wantReq: []string{"/jobs/" + logsJob, "task=count%2F1"},
	}, {
		name:  "JSON: the lines as logged",
		args:  []string{"logs", logsJob, "-o", "json", "--since", "2026-11-21T10:00:01Z"},
		pages: [][]string{{lineClaimed}},
		want: `{"time":"2026-11-21T10:00:01Z","level":"INFO","job_id":"` + logsJob + `","msg":"task claimed","stage":0,"partition":1,"task":"` + logsJob +
			`/0/1","attempt":2,"executor_id":"0af3","stage_name":"count"}` + "\n",
		wantReq: []string{"/jobs/" + logsJob, "since=2026-11-21T10%3A00%3A01Z"},
	}, {
		name:     "follow: new lines until the job has ended, then a last read",
		args:     []string{"logs", logsJob, "--follow"},
		pages:    [][]string{{lineSubmitted}, {}, {lineClaimed}, {lineUser}},
		endAfter: 2,
		want:     "job submitted", // and the rest, checked below
		wantReq:  []string{"/jobs/" + logsJob, "/logs?limit=1000", "/jobs/" + logsJob, "cursor=f1", "/jobs/" + logsJob, "cursor=f2", "cursor=f3"},
	}, {
		name:    "another owner's job (or none): not found, no logs read",
		args:    []string{"logs", "j0000000000000000000009"},
		code:    ExitNotFound,
		wantReq: []string{"/jobs/j0000000000000000000009"},
	}, {
		name: "a task that is not STAGE/PARTITION",
		args: []string{"logs", logsJob, "--task", "count"},
		code: ExitUsage,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &logsAPI{pages: tc.pages, endAfter: tc.endAfter}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			code := Main(context.Background(), tc.args, Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: func() time.Time { return time.Date(2026, 11, 21, 10, 0, 4, 0, time.UTC) }, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, tc.code, errOut.String())
			}
			if tc.want != "" && !strings.Contains(out.String(), tc.want) {
				t.Fatalf("stdout:\n%s\nwant:\n%s", out.String(), tc.want)
			}
			if tc.want == "" && out.Len() > 0 {
				t.Fatalf("stdout %q, want none", out.String())
			}
			if strings.Contains(tc.name, "follow") {
				for _, w := range []string{"job submitted", "task claimed", "counted words"} {
					if strings.Count(out.String(), w) != 1 {
						t.Fatalf("followed output has %q %d times:\n%s", w, strings.Count(out.String(), w), out.String())
					}
				}
			}
			i := 0
			for _, r := range api.requests {
				if i < len(tc.wantReq) && strings.Contains(r, tc.wantReq[i]) {
					i++
				}
			}
			if i < len(tc.wantReq) {
				t.Fatalf("requests %q; want, in order, %q", api.requests, tc.wantReq)
			}
			if tc.code == ExitNotFound {
				for _, r := range api.requests {
					if strings.Contains(r, "/logs") {
						t.Fatalf("read logs of a job that is not the caller's: %q", api.requests)
					}
				}
			}
		})
	}
}

// The EXECUTOR column of batchwork tasks.
func TestAttemptExecutors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		atts []client.Attempt
		want string
	}{
		{nil, "-"},
		{[]client.Attempt{{Executor: "a1"}}, "a1"},
		{[]client.Attempt{{Executor: "a1"}, {Executor: "a1"}}, "a1"},
		{[]client.Attempt{{Executor: "a1"}, {Executor: "b2"}}, "a1, b2"},
		{[]client.Attempt{{}, {Executor: "b2"}}, "-, b2"},
		{[]client.Attempt{{}}, "-"},
	} {
		if got := attemptExecutors(tc.atts); got != tc.want {
			t.Errorf("attemptExecutors(%+v) = %q, want %q", tc.atts, got, tc.want)
		}
	}
}
