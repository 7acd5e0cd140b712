package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/spec"
)

// hostile is text a terminal would act on: an OSC title change ended by
// BEL, a screen clear, a CR overwriting the line, a C1 CSI (U+009B), NEL
// (U+0085), a right-to-left override, a lone byte that is not UTF-8 and a
// line end.
const hostile = "x\x1b]0;pwned\a\x1b[2J\rok\u009b31m\u0085\u202eevil\xff\nSTATE: SUCCEEDED"

const hostileJob = "j0123456789a0123456789"

// hostileAPI answers every route the CLI reads with the hostile text in
// every string the CLI prints.
func hostileAPI(t *testing.T) *httptest.Server {
	t.Helper()
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	part := 1
	status := control.JobStatus{ID: hostileJob, Name: hostile, State: "FAILED", Error: hostile, Manifest: hostile, Output: hostile, Created: now, Ended: &now,
		Stages: []control.StageStatus{{Name: hostile, State: "FAILED", Error: hostile, FailedTasks: 1, BadRecords: 1}}}
	logFields, _ := json.Marshal(map[string]any{"time": now, "level": hostile, "msg": hostile, "task": hostileJob + "/0/1", "attempt": 1,
		"executor_id": hostile, hostile: hostile, "plain": hostile})
	routes := map[string]any{
		"GET /jobs/" + hostileJob: status,
		"GET /jobs":               control.JobList{Jobs: []control.JobSummary{{ID: hostile, Name: hostile, State: "FAILED", Created: now}}},
		"GET /jobs/" + hostileJob + "/tasks": control.TaskList{Tasks: []control.TaskInfo{{Stage: hostile, State: "FAILED", LastError: hostile,
			Attempts: []control.AttemptInfo{{Attempt: 1, Outcome: hostile, Executor: hostile}}}}},
		"GET /jobs/" + hostileJob + "/history": control.History{Events: []control.Event{{At: now, Type: hostile, Stage: hostile, Partition: &part, Message: hostile}}},
		"GET /jobs/" + hostileJob + "/logs":    logs.Page{Lines: []logs.Line{{Time: now, Fields: logFields}}},
		"GET /jobs/" + hostileJob + "/manifest": control.OutputList{Job: hostile, State: hostile, Bucket: hostile,
			Outputs: []control.OutputInfo{{Output: domain.Output{Stage: hostile, Key: hostile}}}},
		"GET /jobs/" + hostileJob + "/bad-records": control.BadRecordPage{Job: hostile, Counts: map[string]int64{hostile: 1},
			Records: []domain.BadRecord{{Stage: hostile, Reason: hostile, Record: hostile}}},
		"POST /jobs/" + hostileJob + "/cancel":  status,
		"POST /jobs/" + hostileJob + "/redrive": status,
		"POST /jobs/" + hostileJob + "/rerun":   control.SubmitResult{JobID: hostile, Created: true},
		"DELETE /jobs/" + hostileJob:            control.JobDeletion{Job: hostile, State: hostile, Objects: 1, Complete: true},
		"DELETE /jobs/" + hostileJob + "/data":  control.DataDeletion{Job: hostile, State: hostile, Deleted: 1, Complete: true},
		"GET /whoami":                           control.Identity{Owner: hostile, Inputs: hostile, InputBuckets: []string{hostile}},
		"GET /schedules":                        control.ScheduleList{Schedules: []control.ScheduleView{hostileSchedule()}},
		"GET /schedules/s1":                     hostileSchedule(),
		"GET /schedules/s1/runs":                control.RunList{Runs: []control.ScheduleRun{{Scheduled: now, Action: hostile, JobID: hostile, Status: hostile, Note: hostile}}},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/jobs":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(client.APIError{Code: "invalid_spec", Message: hostile, Errors: []spec.FieldError{{Field: hostile, Message: hostile}}})
			return
		case r.URL.Path == "/jobs/jmissing":
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(client.APIError{Code: hostile, Message: hostile, Field: hostile})
			return
		}
		v, ok := routes[r.Method+" "+r.URL.Path]
		if !ok {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(v)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostileSchedule() control.ScheduleView {
	v := control.ScheduleView{LastJobID: hostile}
	v.ID, v.Name, v.Expression, v.TimeZone = hostile, hostile, hostile, hostile
	return v
}

// Every print path escapes what a terminal would act on: text from the
// server (names, job and stage errors, an exec program's stderr in a
// task's error, log values, rejection reasons, API error messages) never
// reaches stdout or stderr raw, in text or in JSON output.
func TestNoTerminalControlReachesOutput(t *testing.T) {
	t.Parallel()
	srv := hostileAPI(t)
	specFile := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(specFile, []byte(`{"name":"x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", hostileJob},
		{"status", hostileJob, "-o", "json"},
		{"watch", hostileJob},
		{"list"},
		{"list", "-o", "json"},
		{"tasks", hostileJob},
		{"failed", hostileJob},
		{"history", hostileJob},
		{"logs", hostileJob},
		{"logs", hostileJob, "-o", "json"},
		{"result", hostileJob, "--list", "--stage", "s"},
		{"result", hostileJob, "--bad-records"},
		{"cancel", hostileJob},
		{"redrive", hostileJob},
		{"rerun", hostileJob},
		{"delete", hostileJob},
		{"delete-data", hostileJob},
		{"whoami"},
		{"schedule", "list"},
		{"schedule", "get", "s1"},
		{"schedule", "runs", "s1"},
		{"submit", specFile},
		{"status", "jmissing"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			Main(context.Background(), args, Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if out.Len()+errOut.Len() == 0 {
				t.Fatal("printed nothing")
			}
			for name, b := range map[string][]byte{"stdout": out.Bytes(), "stderr": errOut.Bytes()} {
				if r, at := firstUnsafe(b); at >= 0 {
					t.Errorf("%s has %U at byte %d:\n%q", name, r, at, b)
				}
			}
		})
	}
}

// firstUnsafe is the first rune of b a terminal would act on, other than
// the line ends the CLI writes itself, and its offset (-1 if none).
func firstUnsafe(b []byte) (rune, int) {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && size == 1) || (r != '\n' && termsafe.UnsafeRune(r)) {
			return r, i
		}
		i += size
	}
	return 0, -1
}

func TestTermText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, in, want string }{
		{"plain", "count words: 12 é 日本", "count words: 12 é 日本"},
		{"ESC", "a\x1b[2Jb", `a\x1b[2Jb`},
		{"CR and BEL", "a\rb\a", `a\rb\a`},
		{"line end and tab", "a\nb\tc", `a\nb\tc`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI and NEL", "a\u009b31m\u0085", `a\u009b31m\u0085`},
		{"bidi override and isolate", "a\u202eb\u2066c\u200f", `a\u202eb\u2066c\u200f`},
		{"not UTF-8", "a\xffb", `a\xffb`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := termsafe.Text(tc.in); got != tc.want {
				t.Errorf("termsafe.Text(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if got, want := termsafe.Block("first\x1b[1A\nsecond\r", "  "), "first\\x1b[1A\n  second\\r"; got != want {
		t.Errorf("termBlock = %q, want %q", got, want)
	}
	var v string
	doc := termsafe.JSON([]byte("{\"a\":\"x\u009by\u202ez\"}"))
	if err := json.Unmarshal(doc, &struct{ A *string }{&v}); err != nil || v != "x\u009by\u202ez" {
		t.Errorf("jsonTerm changed the value: %s -> %q (%v)", doc, v, err)
	}
	if _, at := firstUnsafe(doc); at >= 0 {
		t.Errorf("jsonTerm left a raw control: %q", doc)
	}
}
