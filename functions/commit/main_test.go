package main

import (
	"context"
	"errors"
	"testing"

	"github.com/batchwork/batchwork/integration/fntest"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

func TestMain(m *testing.M) { fntest.Main(m, main) }

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) { fntest.MissingEnvironment(t) }

var wired = fntest.Wire

// The handler built from the environment commits a remote executor's
// attempt against the deployed table and bucket: a wrong token is fenced,
// the holder's commit succeeds and completes the one-task job.
func TestHandlerCommitsRemoteAttempts(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ctx := context.Background()
	sub, err := w.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k",
		Spec: []byte(`{"name":"fn","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	c, err := w.Service.RemoteClaim(ctx, control.RemoteClaimRequest{Task: sub.JobID + "/0/0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Blob.PutIfAbsent(ctx, blob.OutputKey(sub.JobID, "s", 0, c.Attempt, 0), []byte("out\n")); err != nil {
		t.Fatal(err)
	}
	stale := c
	stale.Token = "0123456789abcdef0123456789abcdef"
	if err := h(ctx, control.RemoteCommitRequest{Claim: stale, Outputs: 1}); !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("commit with a wrong token: %v, want ErrStaleClaim", err)
	}
	if err := h(ctx, control.RemoteCommitRequest{Claim: c, Outputs: 1}); err != nil {
		t.Fatalf("commit: %v", err)
	}
	st, err := w.Service.Status(ctx, "tester", sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != "SUCCEEDED" {
		t.Fatalf("job %s after its one task committed, want SUCCEEDED", st.State)
	}
}
