package api

import (
	"encoding/json"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
)

// ?task= turns the job's cancel into the task's, with the caller as its
// owner; without it the route cancels the job.
func TestCancelRouteWithTask(t *testing.T) {
	t.Parallel()
	svc := &scripted{}
	h := newTestHandler(svc)
	rec := do(h, "POST", "/jobs/"+fakeID+"/cancel?task=map/3", "alice", "")
	if rec.Code != 200 {
		t.Fatalf("task cancel: %d %s", rec.Code, rec.Body)
	}
	want := control.CancelTaskRequest{Owner: "alice", ID: fakeID, Task: "map/3"}
	if svc.last != want {
		t.Errorf("the control plane got %+v, want %+v", svc.last, want)
	}
	var got control.TaskCancellation
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got.Task != "map/3" || got.Error != "task map/3 cancelled by alice" {
		t.Errorf("answer %s (%v); want the task's cancellation", rec.Body, err)
	}
	if rec := do(h, "POST", "/jobs/"+fakeID+"/cancel", "alice", ""); rec.Code != 200 || svc.last != [2]string{"alice", fakeID} {
		t.Errorf("job cancel: %d, the control plane got %+v", rec.Code, svc.last)
	}
}
