package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/control"
)

const redriveJob = "j0123456789a0123456789"

// redriveAPI answers the routes failed, redrive and rerun call, and
// records what it was sent.
type redriveAPI struct {
	mu       sync.Mutex
	requests []string // method path?query body
}

func (a *redriveAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	a.requests = append(a.requests, r.Method+" "+r.URL.RequestURI()+" "+string(body)+" "+r.Header.Get("Idempotency-Key"))
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == "GET" && r.URL.Path == "/jobs/"+redriveJob+"/tasks":
		_ = json.NewEncoder(w).Encode(control.TaskList{Tasks: []control.TaskInfo{
			{Stage: "map", Partition: 2, State: "FAILED", Attempt: 3, MaxAttempts: 3, LastError: "bad input in line 7", ErrorClass: "error"},
			{Stage: "map", Partition: 4, State: "FAILED", Attempt: 1, MaxAttempts: 3, LastError: "schema mismatch", ErrorClass: "permanent", Tolerated: true},
		}})
	case r.Method == "GET" && r.URL.Path == "/jobs/"+redriveJob:
		_ = json.NewEncoder(w).Encode(control.JobStatus{ID: redriveJob, Name: "wc", State: "FAILED", Redrives: 2})
	case r.Method == "POST" && r.URL.Path == "/jobs/"+redriveJob+"/redrive":
		_ = json.NewEncoder(w).Encode(control.JobStatus{ID: redriveJob, Name: "wc", State: "RUNNING", Redrives: 3,
			Progress: control.Progress{TasksDone: 4, TasksTotal: 6}})
	case r.Method == "POST" && r.URL.Path == "/jobs/"+redriveJob+"/rerun":
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(control.SubmitResult{JobID: "j1111111111a1111111111", Created: true})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"not_found","message":"no such job","field":"id"}`))
	}
}

func TestFailedRedriveRerunCommands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		want    []string // regexps on stdout
		wantReq []string // substrings of the requests, in order
	}{{
		name: "failed lists the failed tasks with their errors",
		args: []string{"failed", redriveJob},
		want: []string{`(?m)^map\s+2\s+3/3\s+retries exhausted\s+no\s+bad input in line 7$`, `(?m)^map\s+4\s+1/3\s+permanent error\s+yes\s+schema mismatch$`,
			`2 failed tasks, 1 of them tolerated`},
		wantReq: []string{"GET /jobs/" + redriveJob + "/tasks?", "state=FAILED"},
	}, {
		name:    "redrive names the redrive count the status shows",
		args:    []string{"redrive", redriveJob},
		want:    []string{`Job ` + redriveJob + ` \(wc\) redriven \(redrive 3\): it is RUNNING; 4 of 6 tasks had committed`},
		wantReq: []string{"GET /jobs/" + redriveJob + " ", `POST /jobs/` + redriveJob + `/redrive {"redrives":2}`},
	}, {
		name:    "rerun --from sends the stage and an idempotency key",
		args:    []string{"rerun", redriveJob, "--from", "reduce", "--idempotency-key", "k7"},
		want:    []string{`Submitted job j1111111111a1111111111, a rerun of ` + redriveJob + `: it runs stage reduce and the stages after it`},
		wantReq: []string{`POST /jobs/` + redriveJob + `/rerun {"from":"reduce"} k7`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			api := &redriveAPI{}
			srv := httptest.NewServer(api)
			defer srv.Close()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			code := Main(context.Background(), tc.args, Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if code != ExitOK {
				t.Fatalf("exit %d; stderr %s", code, errOut.String())
			}
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(out.String()) {
					t.Errorf("stdout lacks %s:\n%s", w, out.String())
				}
			}
			i := 0
			for _, r := range api.requests {
				for i < len(tc.wantReq) && strings.Contains(r, tc.wantReq[i]) {
					i++
				}
			}
			if i < len(tc.wantReq) {
				t.Errorf("requests %q lack %q", api.requests, tc.wantReq[i])
			}
		})
	}
}

// A job that succeeded with tolerated failures says so in its status.
func TestPrintStatusFailedPartitions(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	a := &app{env: Env{Now: func() time.Time { return now }, Loc: time.UTC}}
	var out bytes.Buffer
	a.printStatus(&out, client.JobStatus{ID: "j1", Name: "wc", State: "SUCCEEDED", Created: now, FailedPartitions: 2,
		Stages: []client.StageStatus{{Name: "map", State: "COMPLETED", Total: 6, Committed: 4, FailedTasks: 2}}})
	for _, w := range []string{`(?m)^State:\s+SUCCEEDED \(succeeded with 2 failed partitions\)$`, `stage map: 2 failed tasks tolerated \(batchwork failed j1 lists them\)`} {
		if !regexp.MustCompile(w).MatchString(out.String()) {
			t.Errorf("status lacks %s:\n%s", w, out.String())
		}
	}
}
