package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A process that failed a task and is about to fail its stage and job
// can be overtaken: another failure ends the job, its owner fixes the
// cause and redrives it, and the redrive puts the task back to READY.
// The late process's decision is about the generation that already
// ended; it must not fail the redriven job (or its stage) for it, nor
// cancel the redriven job's stages. The late process is held here just
// before its stage transition, while the other failure and the redrive
// run.
func TestStaleFailureDoesNotEndRedrivenJob(t *testing.T) {
	t.Parallel()
	var broken atomic.Bool
	broken.Store(true)
	reg := batchwork.NewRegistry()
	reg.Register("pf", func(_ context.Context, tk *batchwork.Task) error {
		if broken.Load() && tk.Partition == 0 {
			return batchwork.Permanent(errors.New("bad data"))
		}
		_, err := fmt.Fprintf(tk.Out, "%d\n", tk.Partition)
		return err
	})
	inj := faults.New(1)
	e := newEnv(t, reg, envOptions{faults: inj})
	ctx := context.Background()
	var held atomic.Bool
	var hookErr error
	hookDone := make(chan struct{})
	// stageFail says which job's stage a request fails (sm.StageFail: a
	// stage item's state set to FAILED), if it does.
	stageFail := func(in any) string {
		var vals map[string]types.AttributeValue
		var k map[string]types.AttributeValue
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			vals, k = in.ExpressionAttributeValues, in.Key
		case *dynamodb.TransactWriteItemsInput:
			if u := in.TransactItems[0].Update; u != nil {
				vals, k = u.ExpressionAttributeValues, u.Key
			}
		}
		to, _ := vals[":to"].(*types.AttributeValueMemberS)
		pk, _ := k["pk"].(*types.AttributeValueMemberS)
		sk, _ := k["sk"].(*types.AttributeValueMemberS)
		if to == nil || to.Value != string(sm.StageFailed) || pk == nil || sk == nil || !strings.HasPrefix(sk.Value, "STAGE#") {
			return ""
		}
		return strings.TrimPrefix(pk.Value, "JOB#")
	}
	inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		id := stageFail(in)
		if id == "" || !held.CompareAndSwap(false, true) {
			return false
		}
		defer close(hookDone)
		// Another process fails the job first (its own failure, another
		// reason), then the owner fixes the cause and redrives it.
		other := "stage \"s\": another failure"
		if err := e.r.Store.StageTransition(ctx, dynamo.StageTransitionParams{Job: id, Stage: 0, Event: sm.StageFail, Now: time.Now(), Reason: other}); err != nil {
			hookErr = err
			return false
		}
		if err := e.r.Store.JobEnd(ctx, id, sm.JobFail, other, "", time.Now()); err != nil {
			hookErr = err
			return false
		}
		broken.Store(false)
		_, hookErr = e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id})
		return false
	}})
	id := e.submit("stale-fail", []byte(`{"name":"stale","stages":[{"name":"s","task":"pf","partitions":{"count":2}}]}`))
	select {
	case <-hookDone:
	case <-time.After(time.Minute):
		t.Fatal("no stage of the job was failed within a minute")
	}
	st := e.waitJob(id, time.Minute)
	if hookErr != nil {
		t.Fatalf("the other failure and the redrive: %v", hookErr)
	}
	if st.State != string(sm.JobSucceeded) || st.Redrives != 1 {
		t.Fatalf("redriven job %s (%s) with %d redrives; want SUCCEEDED after 1 redrive: the late process's failure of the first generation ended the redriven one",
			st.State, st.Error, st.Redrives)
	}
}
