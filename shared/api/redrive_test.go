package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

func (s *scripted) Redrive(_ context.Context, req control.RedriveRequest) (control.JobStatus, error) {
	s.last = req
	if s.err != nil {
		return control.JobStatus{}, s.err
	}
	if req.Redrives != nil && *req.Redrives == 99 {
		return control.JobStatus{}, &control.RedriveError{ID: req.ID, Code: "redrive_count", Reason: "stale count"}
	}
	return control.JobStatus{ID: req.ID, Name: "x", State: "RUNNING", Created: t0, Stages: []control.StageStatus{}, Redrives: 1}, nil
}

func (s *scripted) Rerun(_ context.Context, req control.RerunRequest) (control.SubmitResult, error) {
	s.last = req
	if s.err != nil {
		return control.SubmitResult{}, s.err
	}
	switch req.From {
	case "nope":
		return control.SubmitResult{}, &spec.FieldError{Field: "from", Message: `job has no stage "nope"`}
	case "late":
		return control.SubmitResult{}, &control.RedriveError{ID: req.ID, Code: "stage_not_completed", Reason: "stage a did not complete"}
	}
	return control.SubmitResult{JobID: "j1111111111a1111111111", Created: req.IdempotencyKey != "again"}, nil
}

// redriveCases drive POST /jobs/{id}/redrive and /rerun to each
// documented response (see TestHandlersHonourDocument).
var redriveCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "POST", "/jobs/" + fakeID + "/redrive", "alice", `{"redrives":0}`, []string{"Content-Type", "application/json"}, 200},
	{nil, "POST", "/jobs/" + fakeID + "/redrive", "alice", `{"redrive":0}`, []string{"Content-Type", "application/json"}, 400},
	{nil, "POST", "/jobs/" + fakeID + "/redrive", "", "", nil, 401},
	{errNotFound, "POST", "/jobs/" + fakeID + "/redrive", "alice", "", nil, 404},
	{nil, "POST", "/jobs/" + fakeID + "/redrive", "alice", `{"redrives":99}`, []string{"Content-Type", "application/json"}, 409},
	{&control.QuotaError{Quota: "active jobs", Max: 1}, "POST", "/jobs/" + fakeID + "/redrive", "alice", "", nil, 429},
	{errInternal, "POST", "/jobs/" + fakeID + "/redrive", "alice", "", nil, 500},

	{nil, "POST", "/jobs/" + fakeID + "/rerun", "alice", `{"from":"b"}`, []string{"Content-Type", "application/json", "Idempotency-Key", "k"}, 201},
	{nil, "POST", "/jobs/" + fakeID + "/rerun", "alice", "", []string{"Idempotency-Key", "again"}, 200},
	{nil, "POST", "/jobs/" + fakeID + "/rerun", "alice", `{"from":"nope"}`, []string{"Content-Type", "application/json"}, 400},
	{nil, "POST", "/jobs/" + fakeID + "/rerun", "", "", nil, 401},
	{errNotFound, "POST", "/jobs/" + fakeID + "/rerun", "alice", "", nil, 404},
	{nil, "POST", "/jobs/" + fakeID + "/rerun", "alice", `{"from":"late"}`, []string{"Content-Type", "application/json"}, 409},
	{errInternal, "POST", "/jobs/" + fakeID + "/rerun", "alice", "", nil, 500},
}

// The routes pass the caller's owner, the redrive count and the rerun's
// stage and key to the control plane, and a refusal's code comes back
// in a 409.
func TestRedriveAndRerunPassRequest(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	h := newTestHandler(svc)
	if rec := do(h, http.MethodPost, "/jobs/"+fakeID+"/redrive", "alice", `{"redrives":2}`); rec.Code != http.StatusOK {
		t.Fatalf("redrive: %d %s", rec.Code, rec.Body)
	}
	if got, ok := svc.last.(control.RedriveRequest); !ok || got.Owner != "alice" || got.ID != fakeID || got.Redrives == nil || *got.Redrives != 2 {
		t.Fatalf("redrive request %+v", svc.last)
	}
	rec := do(h, http.MethodPost, "/jobs/"+fakeID+"/redrive", "alice", `{"redrives":99}`)
	var e Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != http.StatusConflict || e.Code != "redrive_count" {
		t.Fatalf("stale redrive: %d %s", rec.Code, rec.Body)
	}
	if rec := do(h, http.MethodPost, "/jobs/"+fakeID+"/rerun", "alice", `{"from":"b"}`, "Idempotency-Key", "k1"); rec.Code != http.StatusCreated {
		t.Fatalf("rerun: %d %s", rec.Code, rec.Body)
	}
	if got, ok := svc.last.(control.RerunRequest); !ok || got != (control.RerunRequest{Owner: "alice", ID: fakeID, From: "b", IdempotencyKey: "k1"}) {
		t.Fatalf("rerun request %+v", svc.last)
	}
}
