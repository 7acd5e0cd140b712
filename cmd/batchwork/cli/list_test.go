package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
)

// An empty list names the owner it listed for: a user who sees no jobs
// may be listing as someone else (another profile, another owner).
func TestListNamesTheOwnerWhenEmpty(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		whoami int // the whoami route's status
		want   string
	}{
		{"owner known", http.StatusOK, "No jobs for owner arn:aws:iam::123456789012:role/dev.\n"},
		{"whoami fails", http.StatusInternalServerError, "No jobs.\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch r.URL.Path {
				case "/jobs":
					_ = json.NewEncoder(w).Encode(control.JobList{Jobs: []control.JobSummary{}})
				case "/whoami":
					w.WriteHeader(tc.whoami)
					_ = json.NewEncoder(w).Encode(control.Identity{Owner: "arn:aws:iam::123456789012:role/dev"})
				default:
					w.WriteHeader(http.StatusNotFound)
				}
			}))
			defer srv.Close()
			var out, errOut bytes.Buffer
			vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
			code := Main(context.Background(), []string{"list"}, Env{
				Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
				Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
				Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
			})
			if code != ExitOK || out.String() != tc.want {
				t.Fatalf("exit %d, stdout %q, want %q (stderr %s)", code, out.String(), tc.want, errOut.String())
			}
		})
	}
}
