package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
)

// scriptedAPI answers each request with the next of its answers (the last
// one again once they run out), and records the requests.
type scriptedAPI struct {
	mu      sync.Mutex
	answers []scriptedAnswer
	got     []string // "METHOD path"
}

type scriptedAnswer struct {
	status int
	body   string
}

func (s *scriptedAPI) serve(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.got = append(s.got, r.Method+" "+r.URL.Path)
		a := s.answers[min(len(s.got), len(s.answers))-1]
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.status)
		fmt.Fprint(w, a.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

const jobID = "j19aa5e7c2a1f3b9d0e4c7"

func deletion(deleted int, complete bool) string {
	return fmt.Sprintf(`{"job":%q,"state":"SUCCEEDED","dataDeleted":"2026-11-21T10:00:00Z","deleted":%d,"complete":%v}`, jobID, deleted, complete)
}

// delete-data calls DELETE /jobs/ID/data until nothing is left (the API
// answers 202 while some is), and says how it went; the API's refusals
// exit with their codes. result on a job whose data was deleted says so.
func TestDeleteDataCommand(t *testing.T) {
	cases := []struct {
		name       string
		args       []string
		answers    []scriptedAnswer
		wantCode   int
		wantCalls  []string
		wantStdout string
		wantStderr string
	}{
		{name: "deleted over two calls", args: []string{"delete-data", jobID},
			answers:    []scriptedAnswer{{202, deletion(10000, false)}, {200, deletion(5, true)}},
			wantCode:   cli.ExitOK,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data", "DELETE /jobs/" + jobID + "/data"},
			wantStdout: "Deleted the data of job " + jobID + " (SUCCEEDED): 10,005 objects; its outputs are gone.\n"},
		{name: "already deleted", args: []string{"delete-data", jobID},
			answers:    []scriptedAnswer{{200, deletion(0, true)}},
			wantCode:   cli.ExitOK,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data"},
			wantStdout: "Deleted the data of job " + jobID + " (SUCCEEDED): 0 objects; its outputs are gone.\n"},
		{name: "json", args: []string{"delete-data", jobID, "-o", "json"},
			answers:    []scriptedAnswer{{202, deletion(3, false)}, {200, deletion(4, true)}},
			wantCode:   cli.ExitOK,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data", "DELETE /jobs/" + jobID + "/data"},
			wantStdout: deletion(7, true)},
		{name: "no progress", args: []string{"delete-data", jobID},
			answers:    []scriptedAnswer{{202, deletion(0, false)}},
			wantCode:   cli.ExitError,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data"},
			wantStderr: "the API deleted nothing more but says some is left"},
		{name: "running", args: []string{"delete-data", jobID},
			answers:    []scriptedAnswer{{409, `{"code":"job_running","message":"job ` + jobID + ` is RUNNING; only an ended job's data can be deleted (cancel it, or wait for it to end)","field":"id"}`}},
			wantCode:   cli.ExitConflict,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data"},
			wantStderr: "is RUNNING; only an ended job's data can be deleted"},
		{name: "not found", args: []string{"delete-data", jobID},
			answers:    []scriptedAnswer{{404, `{"code":"not_found","message":"no such job","field":"id"}`}},
			wantCode:   cli.ExitNotFound,
			wantCalls:  []string{"DELETE /jobs/" + jobID + "/data"},
			wantStderr: "no such job"},
		{name: "status says the data was deleted", args: []string{"status", jobID},
			answers: []scriptedAnswer{{200, `{"id":"` + jobID + `","name":"wc","state":"SUCCEEDED","created":"2026-11-21T09:00:00Z",` +
				`"ended":"2026-11-21T09:01:00Z","dataDeleted":"2026-11-21T10:00:00Z","progress":{"tasksDone":1,"tasksTotal":1,"recordsIn":0,"recordsOut":0},"stages":[]}`}},
			wantCode:   cli.ExitOK,
			wantCalls:  []string{"GET /jobs/" + jobID},
			wantStdout: "Data:     deleted 2026-11-21 10:00:00 (its outputs are gone)\n"},
		{name: "result after the deletion", args: []string{"result", jobID},
			answers:    []scriptedAnswer{{410, `{"code":"data_deleted","message":"job ` + jobID + `'s data was deleted at 2026-11-21T10:00:00Z; its outputs are gone","field":"id"}`}},
			wantCode:   cli.ExitError,
			wantCalls:  []string{"GET /jobs/" + jobID + "/manifest"},
			wantStderr: "data was deleted at 2026-11-21T10:00:00Z; its outputs are gone (data_deleted)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &scriptedAPI{answers: tc.answers}
			env, stdout, stderr := testEnv(api.serve(t).URL)
			code := cli.Main(context.Background(), tc.args, env)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			if fmt.Sprint(api.got) != fmt.Sprint(tc.wantCalls) {
				t.Errorf("calls %v, want %v", api.got, tc.wantCalls)
			}
			if strings.HasPrefix(tc.wantStdout, "{") {
				var got, want any
				if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
					t.Fatalf("stdout %q: %v", stdout, err)
				}
				_ = json.Unmarshal([]byte(tc.wantStdout), &want)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("stdout %s, want %s", stdout, tc.wantStdout)
				}
			} else if tc.args[0] == "status" {
				if !strings.Contains(stdout.String(), tc.wantStdout) {
					t.Errorf("stdout %q, want a line %q", stdout, tc.wantStdout)
				}
			} else if stdout.String() != tc.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.wantStderr)
			}
		})
	}
}

func TestDeleteDataHelp(t *testing.T) {
	env, stdout, _ := testEnv("http://127.0.0.1:1")
	if code := cli.Main(context.Background(), []string{"delete-data", "--help"}, env); code != cli.ExitOK {
		t.Fatalf("delete-data --help: exit %d", code)
	}
	if out := stdout.String(); !strings.HasPrefix(out, "Usage: batchwork delete-data ID") || !strings.Contains(out, "\nExamples:\n  batchwork delete-data ") {
		t.Errorf("delete-data --help has no usage or examples:\n%s", out)
	}
}
