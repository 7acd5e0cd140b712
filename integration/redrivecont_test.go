package integration

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A redrive retries a task after a fix as if afresh: a task that spent
// its continuations (sm.MaxContinuations: a day of Lambda invocations)
// before it failed gets them back, or its redriven attempts could each
// run one invocation only, and a long input task that needs continuing
// would fail again however good the fix.
func TestRedriveRestoresContinuations(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	now := time.Now().UTC().Truncate(time.Millisecond)
	ref := domain.TaskRef{Job: "jredrivecont", Stage: 0, Partition: 0}
	putTaskRecord(t, db, e.r.Resources.Table, ref, sm.TaskView{State: sm.TaskFailed, Attempt: 3, MaxAttempts: 3, Token: "tok",
		CheckpointAttempt: 3, Continuations: sm.MaxContinuations})
	for _, due := range []time.Time{{}, now.Add(time.Minute)} { // both forms of the sweep index clause
		if err := e.r.Store.TaskRedrive(ctx, ref, 3, 1, now, now, due); err != nil {
			t.Fatalf("redrive (due %v): %v", due, err)
		}
		tk, err := e.r.Store.TaskGet(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != sm.TaskReady || tk.Checkpoint.Continuations != 0 {
			t.Fatalf("redriven task %s with %d continuations spent; want READY with none", tk.State, tk.Checkpoint.Continuations)
		}
		// Back to FAILED for the second form.
		putTaskRecord(t, db, e.r.Resources.Table, ref, sm.TaskView{State: sm.TaskFailed, Attempt: 3, MaxAttempts: 3, Token: "tok",
			CheckpointAttempt: 3, Continuations: sm.MaxContinuations})
	}
}
