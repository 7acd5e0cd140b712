package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/logs"
)

func (s *scripted) JobLogs(_ context.Context, req control.LogsRequest) (logs.Page, error) {
	s.last = req
	if s.err != nil {
		return logs.Page{}, s.err
	}
	return logs.Page{Lines: []logs.Line{{Time: t0, Fields: json.RawMessage(
		`{"time":"2026-11-21T10:00:00Z","level":"INFO","msg":"task committed","job_id":"` + fakeID +
			`","task":"` + fakeID + `/0/1","attempt":1,"executor_id":"0123abcd"}`)}}, Next: "f123"}, nil
}

// logCases drive GET /jobs/{id}/logs to each documented response (see
// TestHandlersHonourDocument).
var logCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "GET", "/jobs/" + fakeID + "/logs?task=map/1&since=2026-11-21T10:00:00Z&limit=10&cursor=f12", "alice", "", nil, 200},
	{nil, "GET", "/jobs/" + fakeID + "/logs?since=yesterday", "alice", "", nil, 400},
	{nil, "GET", "/jobs/" + fakeID + "/logs", "", "", nil, 401},
	{errNotFound, "GET", "/jobs/" + fakeID + "/logs", "alice", "", nil, 404},
	{errInternal, "GET", "/jobs/" + fakeID + "/logs", "alice", "", nil, 500},
	{control.ErrLogsUnavailable, "GET", "/jobs/" + fakeID + "/logs", "alice", "", nil, 501},
}

// The route passes the caller's owner and the query to the control plane,
// which alone decides whose job it is.
func TestJobLogsPassesOwnerAndQuery(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	rec := do(newTestHandler(svc), http.MethodGet, "/jobs/"+fakeID+"/logs?task=map/1&since=2026-11-21T10:00:05Z&limit=7&cursor=f9", "alice", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := control.LogsRequest{Owner: "alice", ID: fakeID, Task: "map/1", Since: t0.Add(5 * time.Second), Cursor: "f9", Limit: 7}
	if got := svc.last.(control.LogsRequest); got != want {
		t.Fatalf("request %+v, want %+v", got, want)
	}
}

// Another owner's job is a 404 with no lines: the control plane's owner
// check (control.JobLogs) answers not found, and nothing else is said.
func TestJobLogsOtherOwnersJobIsNotFound(t *testing.T) {
	t.Parallel()
	rec := do(newTestHandler(&scripted{err: domain.ErrNotFound}), http.MethodGet, "/jobs/"+fakeID+"/logs", "mallory", "")
	if rec.Code != http.StatusNotFound {
		t.Fatalf("status %d, want 404: %s", rec.Code, rec.Body)
	}
	var e Error
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Code != "not_found" {
		t.Fatalf("body %s", rec.Body)
	}
}
