package control

import (
	"strings"
	"testing"
	"time"

	sm "github.com/batchwork/batchwork/statemachine"
)

// A repeated submission (a client's retry after a lost response, or the
// owner running the same command with the same key) answers the job its
// key already created, whatever time it is: the key, not the clock,
// decides. A `submit --at` repeated once its start time is more than
// StartAtSkew past must answer the job, not refuse `at` as in the past.
func TestSubmitAtRepeatedAfterItsStartAnswersTheJob(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	at := r.clock.Now().Add(5 * time.Minute)
	req := SubmitRequest{Owner: "tester", IdempotencyKey: "at-key", Spec: []byte(oneStage(1, 1, "")), At: at}
	first, err := r.svc.Submit(r.ctx, req)
	if err != nil || !first.Created {
		t.Fatalf("submit --at: %+v, %v", first, err)
	}
	if st := r.job(first.JobID).State; st != sm.JobWaiting {
		t.Fatalf("job %s; want WAITING", st)
	}
	r.clock.Advance(10 * time.Minute)
	again, err := r.svc.Submit(r.ctx, req)
	if err != nil {
		t.Fatalf("the same submission again after its start time: %v; want job %s", err, first.JobID)
	}
	if again.JobID != first.JobID || again.Created {
		t.Fatalf("repeat: %+v; want job %s, not created", again, first.JobID)
	}
}

// A task cancel on a WAITING job is refused with an error that says why:
// the job has not started. It must not claim the job already ended, nor
// that a WAITING job can be cancelled while refusing it.
func TestCancelTaskOfWaitingJobSaysItHasNotStarted(t *testing.T) {
	t.Parallel()
	r := newUnitRig(t)
	res, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "tester", IdempotencyKey: "w", Spec: []byte(oneStage(1, 1, "")),
		At: r.clock.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.svc.CancelTask(r.ctx, CancelTaskRequest{Owner: "tester", ID: res.JobID, Task: "s/0"})
	if err == nil {
		t.Fatal("cancel of a WAITING job's task: accepted")
	}
	if msg := err.Error(); strings.Contains(msg, "already WAITING") || strings.Contains(msg, "only a WAITING or RUNNING job can be cancelled") {
		t.Errorf("refusal %q contradicts itself; want it to say the job has not started", msg)
	}
}
