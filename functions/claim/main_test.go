package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/integration/fntest"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

func TestMain(m *testing.M) { fntest.Main(m, main) }

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) { fntest.MissingEnvironment(t) }

var wired = fntest.Wire

// The handler built from the environment grants claims from the deployed
// table: a granted claim carries the token and the stage's lease, and a
// second request for the held task is refused.
func TestHandlerGrantsClaims(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ctx := context.Background()
	sub, err := w.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k",
		Spec: []byte(`{"name":"fn","lease":"30s","stages":[{"name":"s","task":"x","partitions":{"count":1}}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	task := sub.JobID + "/0/0"
	c, err := h(ctx, control.RemoteClaimRequest{Task: task})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if c.Task != task || c.Attempt != 1 || c.Token == "" || c.Lease != 30*time.Second {
		t.Fatalf("claim %+v, want attempt 1 of %s with a token and a 30s lease", c, task)
	}
	_, err = h(ctx, control.RemoteClaimRequest{Task: task})
	var held *domain.ClaimHeldError
	if !errors.As(err, &held) {
		t.Fatalf("second claim of a held task: %v, want ClaimHeldError", err)
	}
	if _, err := h(ctx, control.RemoteClaimRequest{Task: "no-such-task"}); err == nil || !strings.Contains(err.Error(), "no-such-task") {
		t.Fatalf("claim of a malformed id: %v, want an error naming it", err)
	}
}
