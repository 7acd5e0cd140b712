package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
)

// partialID is a job whose data takes more than one call to delete.
const partialID = "j0123456789a0123456780"

func (s *scripted) DeleteData(_ context.Context, owner, id string) (control.DataDeletion, error) {
	s.last = [2]string{owner, id}
	if s.err != nil {
		return control.DataDeletion{}, s.err
	}
	return control.DataDeletion{Job: id, State: "SUCCEEDED", DataDeleted: t0, Deleted: 1000, Complete: id != partialID}, nil
}

var (
	errRunning     = &control.JobRunningError{ID: fakeID}
	errDataDeleted = &control.DataDeletedError{ID: fakeID, At: t0}
)

// dataCases drive DELETE /jobs/{id}/data, and the outputs of a job whose
// data was deleted, to each documented response (see
// TestHandlersHonourDocument).
var dataCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "DELETE", "/jobs/" + fakeID + "/data", "alice", "", nil, 200},
	{nil, "DELETE", "/jobs/" + partialID + "/data", "alice", "", nil, 202},
	{errBadID, "DELETE", "/jobs/" + fakeID + "/data", "alice", "", nil, 400},
	{nil, "DELETE", "/jobs/" + fakeID + "/data?all=true", "alice", "", nil, 400},
	{nil, "DELETE", "/jobs/" + fakeID + "/data", "", "", nil, 401},
	{errNotFound, "DELETE", "/jobs/" + fakeID + "/data", "alice", "", nil, 404},
	{errRunning, "DELETE", "/jobs/" + fakeID + "/data", "alice", "", nil, 409},
	{errInternal, "DELETE", "/jobs/" + fakeID + "/data", "alice", "", nil, 500},
	{errDataDeleted, "GET", "/jobs/" + fakeID + "/manifest", "alice", "", nil, 410},
}

// The deletion's outcomes reach the caller with their own codes: a running
// job is a 409 job_running, deleted outputs a 410 data_deleted (not a 404:
// the job exists), and the route reaches the control plane with the
// caller as owner.
func TestDeleteDataRoute(t *testing.T) {
	cases := []struct {
		name          string
		err           error
		method, path  string
		wantStatus    int
		wantCode      string
		wantMsgPrefix string
	}{
		{"deleted", nil, "DELETE", "/jobs/" + fakeID + "/data", 200, "", ""},
		{"more to delete", nil, "DELETE", "/jobs/" + partialID + "/data", 202, "", ""},
		{"running", errRunning, "DELETE", "/jobs/" + fakeID + "/data", 409, "job_running", "job " + fakeID + " is RUNNING"},
		{"outputs gone", errDataDeleted, "GET", "/jobs/" + fakeID + "/manifest", 410, "data_deleted", "job " + fakeID + "'s data was deleted at 2026-11-21T10:00:00Z"},
		{"wrong method", nil, "POST", "/jobs/" + fakeID + "/data", 405, "method_not_allowed", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svc := &scripted{err: c.err}
			rec := do(newTestHandler(svc), c.method, c.path, "alice", "")
			if rec.Code != c.wantStatus {
				t.Fatalf("status %d, want %d: %s", rec.Code, c.wantStatus, rec.Body)
			}
			if c.wantCode == "" {
				return
			}
			var e Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("body %s: %v", rec.Body, err)
			}
			if e.Code != c.wantCode || !strings.HasPrefix(e.Message, c.wantMsgPrefix) {
				t.Errorf("error %+v, want code %q and a message starting %q", e, c.wantCode, c.wantMsgPrefix)
			}
			if c.method == http.MethodDelete && svc.last != [2]string{"alice", fakeID} {
				t.Errorf("control plane got %v, want alice's %s", svc.last, fakeID)
			}
		})
	}
}
