package api

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

func (s *scripted) BadRecords(_ context.Context, req control.BadRecordsRequest) (control.BadRecordPage, error) {
	s.last = req
	if s.err != nil {
		return control.BadRecordPage{}, s.err
	}
	if req.Stage == "nope" {
		return control.BadRecordPage{}, &spec.FieldError{Field: "stage", Message: `job has no stage "nope"`}
	}
	return control.BadRecordPage{Job: fakeID, Counts: map[string]int64{"parse": 2}, Records: []domain.BadRecord{
		{Stage: "parse", Partition: 1, Attempt: 2, Offset: 120, Record: "{oops", Reason: "not JSON"},
		{Stage: "parse", Partition: 1, Attempt: 2, Offset: -1, Omitted: 3},
	}, NextCursor: "c1"}, nil
}

// badRecordCases drive GET /jobs/{id}/bad-records to each documented
// response (see TestHandlersHonourDocument).
var badRecordCases = []struct {
	err            error
	method, target string
	owner, body    string
	header         []string
	status         int
}{
	{nil, "GET", "/jobs/" + fakeID + "/bad-records?stage=parse&limit=10&cursor=c0", "alice", "", nil, 200},
	{nil, "GET", "/jobs/" + fakeID + "/bad-records?stage=nope", "alice", "", nil, 400},
	{nil, "GET", "/jobs/" + fakeID + "/bad-records?limit=ten", "alice", "", nil, 400},
	{nil, "GET", "/jobs/" + fakeID + "/bad-records", "", "", nil, 401},
	{errNotFound, "GET", "/jobs/" + fakeID + "/bad-records", "alice", "", nil, 404},
	{errDataDeleted, "GET", "/jobs/" + fakeID + "/bad-records", "alice", "", nil, 410},
	{errInternal, "GET", "/jobs/" + fakeID + "/bad-records", "alice", "", nil, 500},
}

// The route passes the caller's owner and the query to the control plane,
// which alone decides whose job it is.
func TestBadRecordsPassesOwnerAndQuery(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	rec := do(newTestHandler(svc), http.MethodGet, "/jobs/"+fakeID+"/bad-records?stage=parse&limit=7&cursor=c9", "alice", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	want := control.BadRecordsRequest{Owner: "alice", ID: fakeID, Stage: "parse", Limit: 7, Cursor: "c9"}
	if got, _ := svc.last.(control.BadRecordsRequest); got != want {
		t.Fatalf("request %+v, want %+v", svc.last, want)
	}
	var pg control.BadRecordPage
	if err := json.Unmarshal(rec.Body.Bytes(), &pg); err != nil || len(pg.Records) != 2 || pg.Records[0].Offset != 120 || pg.NextCursor != "c1" {
		t.Fatalf("page %+v (%v)", pg, err)
	}
}
