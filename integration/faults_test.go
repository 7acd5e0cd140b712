package integration

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Faults that no emulator produces, injected into real requests (see
// internal/faults): transaction conflicts, throttling, lost responses.

// txFirst returns a Match for TransactWriteItems whose first item is an
// Update or Put with the given marker in its update expression, or with a
// partition key of that prefix.
func txFirst(marker string) func(string, any) bool {
	return func(_ string, in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		if !ok || len(tx.TransactItems) == 0 {
			return false
		}
		switch it := tx.TransactItems[0]; {
		case it.Update != nil:
			return it.Update.UpdateExpression != nil && strings.Contains(*it.Update.UpdateExpression, marker)
		case it.Put != nil:
			pk, _ := it.Put.Item["pk"].(*types.AttributeValueMemberS)
			return pk != nil && strings.HasPrefix(pk.Value, marker)
		}
		return false
	}
}

// On AWS, transactions that overlap on one item are cancelled with
// TransactionConflict, and the SDK does not retry them. Every transaction
// of the control plane is retried, so one conflict costs a retry, never
// an attempt or a job.
func TestTransactionConflictsAreRetried(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		match func(string, any) bool
		run   func(t *testing.T, e *env)
	}{
		// A commit with rejected records is the one commit that is still
		// a transaction (the stage's bad-record guard must refuse it).
		{"commit", txFirst("catt = :att"), func(t *testing.T, e *env) {
			id := e.submit("c", []byte(`{"name":"c","stages":[{"name":"s","task":"x","maxBadRecords":3,"partitions":{"count":1}}]}`))
			c := mustClaim(t, e.r.Service, domain.TaskRef{Job: id})
			putOutput(t, e, c, "out\n")
			if err := e.r.Service.Commit(context.Background(), c, control.CommitResult{Outputs: 1, BadRecords: 1}); err != nil {
				t.Fatalf("commit: %v", err)
			}
			assertCommittedOnce(t, e, id, 0, 1, 1)
			if st := jobState(t, e.r.Service, id); st.State != string(sm.JobSucceeded) {
				t.Fatalf("job %s, want SUCCEEDED", st.State)
			}
		}},
		{"submit", txFirst("IDEM#"), func(t *testing.T, e *env) {
			id := e.submit("s", []byte(oneStage("s", "x", 1)))
			again := e.submit("s", []byte(oneStage("s", "x", 1)))
			if again != id {
				t.Fatalf("resubmission gave job %s, want %s", again, id)
			}
		}},
		{"cancel", txFirst("#end = :now"), func(t *testing.T, e *env) {
			id := e.submit("k", []byte(oneStage("k", "x", 1)))
			if _, err := e.r.Service.Cancel(context.Background(), "tester", id); err != nil {
				t.Fatalf("cancel: %v", err)
			}
			if st := jobState(t, e.r.Service, id); st.State != string(sm.JobCancelled) {
				t.Fatalf("job %s, want CANCELLED", st.State)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inj := faults.New(1)
			e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
			inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Conflict, Count: 2, Match: tc.match})
			tc.run(t, e)
			if n := inj.Total(); n != 2 {
				t.Fatalf("%d conflicts injected, want 2", n)
			}
		})
	}
}

// A claim whose write applied but whose response was lost is retried by
// the SDK; the retry finds the condition false. The read-back must see
// the caller's own token and grant the claim, not report it held.
func TestClaimWithLostResponseIsGranted(t *testing.T) {
	t.Parallel()
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, faults: inj})
	id := e.submit("lost", []byte(oneStage("lost", "x", 1)))
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Match: func(_ string, in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		return ok && u.UpdateExpression != nil && strings.Contains(*u.UpdateExpression, "tok = :tok, lease = :lease")
	}})
	c, err := e.r.Service.Claim(context.Background(), domain.TaskRef{Job: id})
	if err != nil {
		t.Fatalf("claim with a lost response: %v", err)
	}
	if inj.Total() != 1 {
		t.Fatalf("%d faults injected, want 1", inj.Total())
	}
	task, err := e.r.Store.TaskGet(context.Background(), c.Task.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if c.Task.Attempt != 1 || task.Token != c.Task.Token || task.State != sm.TaskClaimed {
		t.Fatalf("claim attempt %d, task %s with token %q; want attempt 1 held by the claim's token %q", c.Task.Attempt, task.State, task.Token, c.Task.Token)
	}
}

// An application-level retry of a submit (the client timed out) within
// DynamoDB's 10-minute token window returns the original job, and the same
// key with another spec is a conflict, not an internal error.
func TestSubmitRetriedByTheClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	first, err := e.r.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(oneStage("a", "x", 1))})
	if err != nil || !first.Created {
		t.Fatalf("submit: %+v %v", first, err)
	}
	again, err := e.r.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(oneStage("a", "x", 1))})
	if err != nil || again.JobID != first.JobID || again.Created {
		t.Fatalf("resubmit: %+v %v; want job %s, not created", again, err, first.JobID)
	}
	_, err = e.r.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: []byte(oneStage("b", "x", 1))})
	if !errors.Is(err, domain.ErrIdempotencyConflict) {
		t.Fatalf("same key, other spec: %v, want ErrIdempotencyConflict", err)
	}
}

// A job runs to the end while requests are throttled, transactions
// conflict and responses are lost, at rates well above AWS's: none of it
// ends the job or commits a task twice.
func TestJobSurvivesInjectedFaults(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := t.Out.Write([]byte("ok\n"))
		return err
	})
	inj := faults.New(7)
	inj.SetEnabled(false) // provisioning runs clean
	e := newEnv(t, reg, envOptions{faults: inj})
	inj.Add(
		faults.Rule{Kind: faults.Throttle, Rate: 0.2},
		faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Conflict, Rate: 0.1},
		faults.Rule{Kind: faults.Lost, Rate: 0.05},
	)
	inj.SetEnabled(true)
	id := e.submit("faulty", []byte(`{"name":"faulty","stages":[
		{"name":"a","task":"work","partitions":{"count":6}},
		{"name":"b","task":"work","after":["a"],"partitions":{"count":3}}]}`))
	st := e.waitJob(id, 2*time.Minute)
	inj.SetEnabled(false)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s) under faults, want SUCCEEDED", st.State, st.Error)
	}
	if inj.Total() < 20 {
		t.Fatalf("only %d faults injected; the test exercised little", inj.Total())
	}
	assertCommittedOnce(t, e, id, 0, 6, 1)
	assertCommittedOnce(t, e, id, 1, 3, 1)
}
