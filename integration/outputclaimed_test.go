package integration

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An output folder that another job published, one inside it or one
// holding it, is refused at submit with 409 output_claimed on "output"
// (as a rerun is), instead of running every task and failing at publish.
// A retry of the submission that published it still answers its job.
func TestSubmitRefusesAClaimedOutputFolder(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("copy", func(ctx context.Context, t *batchwork.Task) error {
		_, err := io.WriteString(t.Out, "x\n")
		return err
	})
	e := newEnv(t, reg, envOptions{})
	withOut := func(out string) []byte {
		return []byte(`{"name":"p","output":"` + out + `","stages":[{"name":"s","task":"copy","partitions":{"count":1}}]}`)
	}
	first := e.submitAs("tester", "first", withOut("outputs:claimed/run-1/"))
	if st := e.waitJob(first, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("first job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	for _, tc := range []struct{ name, output string }{
		{"the folder itself", "outputs:claimed/run-1/"},
		{"a folder inside it", "outputs:claimed/run-1/s/"},
		{"a folder holding it", "outputs:claimed/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call("tester", http.MethodPost, "/jobs", withOut(tc.output), "Idempotency-Key", "again-"+strings.ReplaceAll(tc.name, " ", "-"))
			ae := r.apiErr(t)
			if r.Status != http.StatusConflict || ae.Code != "output_claimed" || ae.Field != "output" || !strings.Contains(ae.Message, "job "+first) {
				t.Fatalf("got %d %+v; want 409 output_claimed on output naming job %s", r.Status, ae, first)
			}
		})
	}
	// The same request again is the same job, not a refusal.
	var res control.SubmitResult
	e.callJSON("tester", http.MethodPost, "/jobs", withOut("outputs:claimed/run-1/"), http.StatusOK, &res, "Idempotency-Key", "first")
	if res.JobID != first {
		t.Fatalf("retry of the first submission answered job %q, want %s", res.JobID, first)
	}
	// A sibling folder is free.
	if id := e.submitAs("tester", "sibling", withOut("outputs:claimed-2/")); id == "" {
		t.Fatal("no job for a free folder")
	}
}
