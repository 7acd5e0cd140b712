package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A speculative copy is claimed first and checked after, as an ordinary
// claim: a cancel that returns while the copy's claim transaction is on
// its way (slow, throttled and retried) is seen by the check after it,
// which refuses the copy and cancels the task, so no attempt started
// after the cancel commits.
func TestCopyClaimedDuringCancelIsRefused(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	if c := r.straggle(t, 1); c.Speculated != 1 {
		t.Fatalf("sweep launched %d copies, want 1 (counts %+v)", c.Speculated, c)
	}
	_, store, inj := hookedStores(r.e)
	cfg := r.cfg
	cfg.JobStateTTL = -1 // read the job's state at each check, as after the TTL
	claimer := newService(r.e, cfg, store, r.e.r.Queue, r.clk, r.logs.logger())
	var cancelled bool
	var cancelErr error
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		if _, ok := in.(*dynamodb.TransactWriteItemsInput); !ok || cancelled {
			return false
		}
		cancelled = true
		_, cancelErr = r.svc.Cancel(ctx, "tester", r.job)
		return false // a hook, never a fault
	}})
	ref := batch.TaskRef{Job: r.job, Partition: 3}
	_, err := claimer.ClaimCopy(ctx, ref)
	if !cancelled || cancelErr != nil {
		t.Fatalf("the job was not cancelled during the copy's claim: %v %v", cancelled, cancelErr)
	}
	if !errors.Is(err, batch.ErrJobNotRunning) {
		t.Fatalf("copy claimed while its job was cancelled: %v, want ErrJobNotRunning", err)
	}
	task := r.task(t, 3)
	if task.State != sm.TaskCancelled {
		t.Fatalf("task after the refused copy: %s, want CANCELLED", task.State)
	}
	// Whatever the copy's claim wrote, its attempt cannot commit.
	if task.Copy != nil && task.Copy.Token != "" {
		cp := control.Claim{Task: dynamo.AsCopyClaim(task), Spec: r.claims[3].Spec, Lease: r.claims[3].Lease, Speculative: true}
		putOutput(t, r.e, cp, "copy after cancel\n")
		if err := r.svc.Commit(ctx, cp, 1); err == nil {
			t.Fatal("the refused copy committed")
		}
	}
	if task := r.task(t, 3); task.State == sm.TaskSucceeded || task.CommittedAttempt != 0 {
		t.Fatalf("task %s committed attempt %d after its job's cancel, want none", task.State, task.CommittedAttempt)
	}
}
