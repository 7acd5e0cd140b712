package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	sm "github.com/batchwork/batchwork/statemachine"
)

func (s *scripted) DeleteJob(_ context.Context, owner, id string) (control.JobDeletion, error) {
	s.last = [2]string{owner, id}
	if s.err != nil {
		return control.JobDeletion{}, s.err
	}
	return control.JobDeletion{Job: id, State: "SUCCEEDED", Objects: 10, Records: 40, Complete: id != partialID}, nil
}

var errNotEnded = &control.JobNotEndedError{ID: fakeID, State: sm.JobPublishing}

// jobDeleteCases drive DELETE /jobs/{id} to each documented response (see
// TestHandlersHonourDocument).
var jobDeleteCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "DELETE", "/jobs/" + fakeID, "alice", "", nil, 200},
	{nil, "DELETE", "/jobs/" + partialID, "alice", "", nil, 202},
	{errBadID, "DELETE", "/jobs/" + fakeID, "alice", "", nil, 400},
	{nil, "DELETE", "/jobs/" + fakeID + "?force=true", "alice", "", nil, 400},
	{nil, "DELETE", "/jobs/" + fakeID, "", "", nil, 401},
	{errNotFound, "DELETE", "/jobs/" + fakeID, "alice", "", nil, 404},
	{errNotEnded, "DELETE", "/jobs/" + fakeID, "alice", "", nil, 409},
	{errInternal, "DELETE", "/jobs/" + fakeID, "alice", "", nil, 500},
}

// The route reaches the control plane with the caller as owner; a job
// that has not ended is a 409 job_running naming its state; 202 while
// some of the job is left.
func TestDeleteJobRoute(t *testing.T) {
	cases := []struct {
		name       string
		err        error
		id         string
		wantStatus int
		wantCode   string
	}{
		{name: "deleted", id: fakeID, wantStatus: http.StatusOK},
		{name: "more left", id: partialID, wantStatus: http.StatusAccepted},
		{name: "publishing", err: errNotEnded, id: fakeID, wantStatus: http.StatusConflict, wantCode: "job_running"},
		{name: "running", err: errRunning, id: fakeID, wantStatus: http.StatusConflict, wantCode: "job_running"},
		{name: "not found", err: errNotFound, id: fakeID, wantStatus: http.StatusNotFound, wantCode: "not_found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := &scripted{err: c.err}
			rec := do(newTestHandler(svc), "DELETE", "/jobs/"+c.id, "alice", "")
			if rec.Code != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.wantStatus, rec.Body)
			}
			if svc.last != [2]string{"alice", c.id} {
				t.Errorf("control plane called with %v", svc.last)
			}
			if c.wantCode != "" {
				var e Error
				if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != c.wantCode {
					t.Errorf("error %s, want code %s", rec.Body, c.wantCode)
				}
				return
			}
			var d control.JobDeletion
			if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || d.Job != c.id || d.Complete != (c.wantStatus == http.StatusOK) {
				t.Errorf("body %s", rec.Body)
			}
		})
	}
}
