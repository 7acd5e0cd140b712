package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
)

// A job submitted through the API to start within the handoff window has
// its start handed to the timer queue by the api function itself (the
// IAM check sees the api send to the timer queue, which its role grants),
// so it does not wait for the sweep's next run.
func TestStartAtNearThroughTheAPI(t *testing.T) {
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	at := time.Now().UTC().Add(30 * time.Second).Truncate(time.Second)
	var res control.SubmitResult
	e.callJSON("erin", http.MethodPost, "/jobs?at="+at.Format(time.RFC3339), []byte(atSpec), http.StatusCreated, &res, "Idempotency-Key", "near-at")
	if !res.Created || res.StartAt == nil || !res.StartAt.Equal(at) {
		t.Fatalf("submit: %+v, want a job created to start at %s", res, at)
	}
	if n := messagesIn(t, e, e.r.Resources.Queues.Timer); n != 1 {
		t.Fatalf("timer queue holds %d messages, want the start the api handed off", n)
	}
}
