package integration

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/executor"
	sm "github.com/batchwork/batchwork/statemachine"
)

// No owner can read another owner's data through an input prefix: the
// installation's job area (every job's outputs) is refused unless the
// prefix lies within one of the submitter's own jobs, and a job id that is
// not the submitter's reads like one that does not exist.
func TestInputPrefixCannotReachOtherOwnersJobs(t *testing.T) {
	t.Parallel()
	reg := executor.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	if err := e.r.Blob.PutIfAbsent(ctx, "in/alice/a.txt", []byte("secret words of alice\n")); err != nil {
		t.Fatal(err)
	}
	bucket := e.r.Resources.Bucket
	alices := e.submitAs("alice", "wc", wordcount.Spec("wc", "s3://"+bucket+"/in/alice/", 1<<20, 1))
	if st := e.waitJobAs("alice", alices, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("alice's job %s (%s)", st.State, st.Error)
	}
	const field = "stages[0].partitions.input.prefix"
	for _, tc := range []struct {
		name, owner, prefix string
		ok                  bool
	}{
		{"the whole job area", "bob", "jobs/", false},
		{"the whole bucket", "bob", "", false},
		{"another owner's job", "bob", "jobs/" + alices + "/", false},
		{"another owner's outputs", "bob", "jobs/" + alices + "/out/", false},
		{"part of a job id", "bob", "jobs/" + alices[:4], false},
		{"a job that does not exist", "bob", "jobs/j00000000000000000000/", false},
		{"one's own job's outputs", "alice", "jobs/" + alices + "/out/", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := wordcount.Spec("steal", fmt.Sprintf("s3://%s/%s", bucket, tc.prefix), 1<<20, 1)
			resp := e.call(tc.owner, http.MethodPost, "/jobs", body, "Idempotency-Key", "k-"+tc.name)
			switch {
			case tc.ok && resp.Status != http.StatusCreated:
				t.Fatalf("%s: %d %s, want 201", tc.prefix, resp.Status, resp.Body)
			case !tc.ok && (resp.Status != http.StatusBadRequest || resp.apiErr(t).Field != field):
				t.Fatalf("%s: %d %s, want 400 on %s", tc.prefix, resp.Status, resp.Body, field)
			}
		})
	}
}
