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

const deleteJob = "j0123456789a0123456789"

// deleteAPI answers the job's DELETEs from a script: one status code per
// request (the last repeats); 200 and 202 with a deletion's JSON.
type deleteAPI struct {
	mu      sync.Mutex
	answers []int
	n       int
}

func (f *deleteAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r.Method != http.MethodDelete || r.URL.Path != "/jobs/"+deleteJob {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	status := f.answers[min(f.n, len(f.answers)-1)]
	f.n++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	switch status {
	case http.StatusOK, http.StatusAccepted:
		fmt.Fprintf(w, `{"job":%q,"state":"SUCCEEDED","objects":3,"records":40,"complete":%v}`, deleteJob, status == http.StatusOK)
	case http.StatusNotFound:
		fmt.Fprint(w, `{"code":"not_found","message":"no such job","field":"id"}`)
	case http.StatusConflict:
		fmt.Fprint(w, `{"code":"job_running","message":"job is RUNNING; only an ended job can be deleted"}`)
	default:
		fmt.Fprintf(w, `{"message":"%s"}`, http.StatusText(status))
	}
}

// `batchwork delete` over the answers the API and its gateway can give. A
// 404 after an answer that may have been lost with the deletion done (a
// gateway's 502 or 504: the API may have finished after it gave up) means
// the job is gone, as asked; a 404 at first, or after answers that say
// nothing was done (throttling), means there was no such job.
func TestDeleteCommandAnswers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		answers []int
		code    int
		out     string
	}{
		{"deleted in one call", []int{200}, ExitOK, "Deleted job " + deleteJob + " (SUCCEEDED): 40 records and 3 objects."},
		{"deleted in two calls", []int{202, 200}, ExitOK, "80 records and 6 objects"},
		{"no such job", []int{404}, ExitNotFound, "no such job"},
		{"a running job", []int{409}, ExitConflict, "RUNNING"},
		{"gateway timeout, then gone", []int{504, 404}, ExitOK, "Deleted job " + deleteJob + "."},
		{"bad gateway, then gone", []int{502, 404}, ExitOK, "Deleted job " + deleteJob + "."},
		{"throttled, then not found", []int{429, 404}, ExitNotFound, "no such job"},
		{"a call, then another caller finished", []int{202, 404}, ExitOK, "Deleted job " + deleteJob + " (SUCCEEDED): 40 records and 3 objects."},
		{"gateway timeouts throughout", []int{504}, ExitError, "Gateway Timeout"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(&deleteAPI{answers: c.answers})
			defer srv.Close()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			code := Main(context.Background(), []string{"delete", deleteJob}, Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if code != c.code || !strings.Contains(out.String()+errOut.String(), c.out) {
				t.Errorf("exit %d, %q %q; want exit %d saying %q", code, out.String(), errOut.String(), c.code, c.out)
			}
		})
	}
}
