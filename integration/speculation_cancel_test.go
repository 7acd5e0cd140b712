package integration

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A speculative copy is claimed first and checked after, as an ordinary
// claim: a cancel that returns while the copy's claim transaction is on
// its way (slow, throttled and retried) is seen by the check after it,
// which refuses the copy and drops its claim, so no attempt started
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
	ref := domain.TaskRef{Job: r.job, Partition: 3}
	_, err := claimer.ClaimCopy(ctx, ref)
	if !cancelled || cancelErr != nil {
		t.Fatalf("the job was not cancelled during the copy's claim: %v %v", cancelled, cancelErr)
	}
	if !errors.Is(err, domain.ErrJobNotRunning) {
		t.Fatalf("copy claimed while its job was cancelled: %v, want ErrJobNotRunning", err)
	}
	// The copy's claim is dropped; the task stays with its holder, which
	// claimed before the cancel (the job's end reaches it at its checks).
	task := r.task(t, 3)
	if task.State != sm.TaskClaimed || task.Token != r.claims[3].Task.Token {
		t.Fatalf("task after the refused copy: %s (token %q), want CLAIMED by its holder", task.State, task.Token)
	}
	if task.Copy != nil && task.Copy.Live() {
		t.Fatalf("the refused copy's claim is still live: %+v", *task.Copy)
	}
	// The copy's attempt cannot commit.
	cp := r.claims[3]
	cp.Task.Attempt++
	cp.Task.Token = "the-refused-copy"
	cp.Speculative = true
	putOutput(t, r.e, cp, "copy after cancel\n")
	if err := r.svc.Commit(ctx, cp, control.CommitResult{Outputs: 1}); err == nil {
		t.Fatal("the refused copy committed")
	}
	if task := r.task(t, 3); task.State == sm.TaskSucceeded || task.CommittedAttempt != 0 {
		t.Fatalf("task %s committed attempt %d after its job's cancel, want none", task.State, task.CommittedAttempt)
	}
}

// staleStateStore answers every job-state read with one state: a process
// whose cached state is stale (a job redriven moments ago still reads
// FAILED for up to JobStateTTL).
type staleStateStore struct {
	control.Store
	state sm.JobState
}

func (s staleStateStore) JobState(context.Context, string) (sm.JobState, error) { return s.state, nil }

// A copy refused on a stale job state drops only its own claim: the task
// runs on under its holder. Cancelling the task for a job that is in fact
// running (redriven after the state was read) threw the holder's work
// away and left the task to the sweep's redrive repair.
func TestCopyRefusedOnAStaleStateLeavesItsTaskRunning(t *testing.T) {
	t.Parallel()
	r := newSpeculationRig(t, 4, 16)
	ctx := context.Background()
	if c := r.straggle(t, 1); c.Speculated != 1 {
		t.Fatalf("sweep launched %d copies, want 1 (counts %+v)", c.Speculated, c)
	}
	cfg := r.cfg
	cfg.JobStateTTL = -1
	stale := newService(r.e, cfg, staleStateStore{Store: r.e.r.Store, state: sm.JobFailed}, r.e.r.Queue, r.clk, r.logs.logger())
	ref := domain.TaskRef{Job: r.job, Partition: 3}
	if _, err := stale.ClaimCopy(ctx, ref); !errors.Is(err, domain.ErrJobNotRunning) {
		t.Fatalf("copy claimed on a FAILED state: %v, want ErrJobNotRunning", err)
	}
	task := r.task(t, 3)
	if task.State != sm.TaskClaimed || task.Token != r.claims[3].Task.Token {
		t.Fatalf("task after the refused copy: %s (token %q), want CLAIMED by its holder", task.State, task.Token)
	}
	if task.Copy != nil && task.Copy.Live() {
		t.Fatalf("the refused copy's claim is still live: %+v", *task.Copy)
	}
	// The holder commits as if no copy had been tried.
	r.commit(t, r.claims[3])
}
