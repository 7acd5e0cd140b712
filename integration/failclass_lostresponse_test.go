package integration

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A classed failure whose write applied but whose response was lost is
// retried by the SDK, and the retry finds the condition false. The
// holder's failure must be recognised as its own: a retry reported as
// retried (its history says how the attempt ended), a permanent failure
// that fails the task and its job at once, not "stale" (the executor
// would leave it, and nothing would record the attempt's end).
func TestClassedFailureWithLostResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		class     domain.ErrorClass
		op        string // the write whose response is lost
		wantRetry bool
		wantState sm.TaskState
	}{
		{name: "timed out, retried", class: domain.ClassTimedOut, op: "UpdateItem", wantRetry: true, wantState: sm.TaskReady},
		{name: "permanent", class: domain.ClassPermanent, op: "TransactWriteItems", wantState: sm.TaskFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inj := faults.New(1)
			e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
			id := e.submit("lost", []byte(oneStage("lost", "x", 1)))
			ctx := context.Background()
			c, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id})
			if err != nil {
				t.Fatal(err)
			}
			inj.Once(faults.Rule{Service: "DynamoDB", Operation: tt.op, Kind: faults.Lost, Match: func(_ string, in any) bool {
				switch u := in.(type) {
				case *dynamodb.UpdateItemInput:
					return u.UpdateExpression != nil && strings.Contains(*u.UpdateExpression, "ecl = :ecl")
				case *dynamodb.TransactWriteItemsInput:
					up := u.TransactItems[0].Update
					return up != nil && up.UpdateExpression != nil && strings.Contains(*up.UpdateExpression, "ecl = :ecl")
				}
				return false
			}})
			d, err := e.r.Service.Fail(ctx, c, control.FailParams{Cause: "timed out after 1s", Class: tt.class})
			if inj.Total() != 1 {
				t.Fatalf("%d faults injected, want 1", inj.Total())
			}
			if err != nil || d.Retry != tt.wantRetry {
				t.Fatalf("fail with a lost response: %+v, %v; want retry %v and no error", d, err, tt.wantRetry)
			}
			task, err := e.r.Store.TaskGet(ctx, c.Task.Ref)
			if err != nil {
				t.Fatal(err)
			}
			if task.State != tt.wantState || task.ErrorClass != tt.class {
				t.Fatalf("task %s class %q, want %s class %q", task.State, task.ErrorClass, tt.wantState, tt.class)
			}
		})
	}
}
