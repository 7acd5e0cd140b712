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
)

// `batchwork cancel ID --task STAGE/PARTITION` sends the task's cancel and
// says what became of the job; the API's refusals keep their exit codes,
// and an empty --task never cancels the whole job.
func TestCancelTaskCommand(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		args   []string
		status int
		body   string
		code   int
		out    string
	}{
		{"the job fails", []string{"--task", "map/3"}, 200,
			`{"jobId":"%s","task":"map/3","stage":"map","partition":3,"state":"FAILED","tolerated":false,"error":"task map/3 cancelled by alice","cancelled":"2026-11-21T10:00:00Z","jobState":"FAILED"}`,
			ExitOK, "Task map/3 of job " + deleteJob + " is cancelled (FAILED); the job failed: task map/3 cancelled by alice."},
		{"tolerated", []string{"--task", "map/3"}, 200,
			`{"jobId":"%s","task":"map/3","stage":"map","partition":3,"state":"FAILED","tolerated":true,"error":"task map/3 cancelled by alice","cancelled":"2026-11-21T10:00:00Z","jobState":"RUNNING"}`,
			ExitOK, "its stage tolerates the failure, and the job goes on without it (RUNNING)"},
		{"committed first", []string{"--task", "map/3"}, 409, `{"code":"task_ended","message":"task map/3 of job %s already finished: it committed (SUCCEEDED) before the cancel; its outputs stand","field":"task"}`,
			ExitConflict, "already finished"},
		{"no such task", []string{"--task", "map/9"}, 404, `{"code":"not_found","message":"job %s has no task map/9","field":"task"}`,
			ExitNotFound, "no task map/9"},
		{"empty task", []string{"--task="}, 200, `{}`, ExitUsage, "STAGE/PARTITION"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			var got []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				fmt.Fprintf(w, c.body, deleteJob)
			}))
			defer srv.Close()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			code := Main(context.Background(), append([]string{"cancel", deleteJob}, c.args...), Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if code != c.code || !strings.Contains(out.String()+errOut.String(), c.out) {
				t.Errorf("exit %d, %q %q; want exit %d saying %q", code, out.String(), errOut.String(), c.code, c.out)
			}
			mu.Lock()
			defer mu.Unlock()
			if c.code == ExitUsage {
				if len(got) != 0 {
					t.Errorf("an empty --task sent %v", got)
				}
				return
			}
			if want := "POST /jobs/" + deleteJob + "/cancel?task=" + strings.ReplaceAll(c.args[1], "/", "%2F"); len(got) != 1 || got[0] != want {
				t.Errorf("requests %v, want [%s]", got, want)
			}
		})
	}
}
