package integration

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A redrive gives each unfinished task its stage's attempts once. Its
// steps are finished again by a repeated request (a retry after a lost
// answer) and by the sweep's look StartGrace after it, when the redriven
// tasks may already be claimed: an attempt claimed after the redrive uses
// the budget the redrive gave, it does not get another, and a task that
// failed again after the redrive is not put back a second time. Here the
// repeated request runs while the redriven attempt runs.
func TestRepeatedRedriveGivesNoMoreAttempts(t *testing.T) {
	t.Parallel()
	var e *env // set before any task runs
	var broken atomic.Bool
	broken.Store(true)
	var repeated atomic.Bool
	var repeatErr error
	reg := batchwork.NewRegistry()
	reg.Register("flaky", func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Attempt == 2 && repeated.CompareAndSwap(false, true) {
			// The first redrive's request again: its redrive count is
			// the one before it.
			zero := 0
			_, repeatErr = e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: tk.Job, Redrives: &zero})
		}
		if broken.Load() {
			return errors.New("still broken")
		}
		_, err := tk.Out.Write([]byte("ok\n"))
		return err
	})
	e = newEnv(t, reg, envOptions{})
	ctx := context.Background()
	id := e.submit("budget", []byte(`{"name":"budget","stages":[{"name":"s","task":"flaky","partitions":{"count":1},"retry":{"maxAttempts":1}}]}`))
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s, want FAILED", st.State)
	}
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatalf("redrive: %v", err)
	}
	st := e.waitJob(id, time.Minute)
	if !repeated.Load() || repeatErr != nil {
		t.Fatalf("the repeated redrive request during attempt 2: ran %v, %v", repeated.Load(), repeatErr)
	}
	if want := `stage "s" task 0 failed after 2 attempts: still broken`; st.State != string(sm.JobFailed) || st.Error != want {
		t.Fatalf("after the redrive: %s (%s); want FAILED (%s): the repeated request gave the running attempt another", st.State, st.Error, want)
	}
	// The sweep's look at the redrive, late: attempt 2's failure is the
	// redriven generation's, not one for this redrive to put back.
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	now := time.Now()
	if err := e.r.Store.TaskRedrive(ctx, ref, 1, 1, now, now, now); !errors.Is(err, sm.ErrInvalidTransition) {
		t.Fatalf("redrive 1 putting back attempt 2's failure: %v, want %v", err, sm.ErrInvalidTransition)
	}
	if tk, err := e.r.Store.TaskGet(ctx, ref); err != nil || tk.State != sm.TaskFailed || tk.Attempt != 2 {
		t.Fatalf("task after its second failure: %s attempt %d (%v); want FAILED at attempt 2", tk.State, tk.Attempt, err)
	}
	// A second redrive, after the fix, puts it back.
	broken.Store(false)
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatalf("second redrive: %v", err)
	}
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("after the second redrive: %s (%s), want SUCCEEDED", st.State, st.Error)
	}
}
