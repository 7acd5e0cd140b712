package integration

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The step that takes a failed task out of the sweep index after its
// failure reached the job must not take out the entry of a redrive that
// came in between: the redriven task's entry is what finds it if its
// message is lost. The redrive is run from inside the removal's request,
// right before it is sent.
func TestUnindexOfAFailedTaskKeepsARedrivesEntry(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	_, hooked, inj := hookedStores(rig.e)
	failer := rig.service(hooked, rig.e.r.Queue)
	id := submitTo(t, rig.svc, "unindex", `{"name":"unindex","stages":[{"name":"s","task":"work","retry":{"maxAttempts":1},"partitions":{"count":1}}]}`)
	ref := domain.TaskRef{Job: id}
	var once sync.Once
	var redriveErr error
	redriven := false
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		pk, _ := u.Key["pk"].(*types.AttributeValueMemberS)
		if ok && pk != nil && strings.HasPrefix(pk.Value, "TASK#") && u.UpdateExpression != nil && strings.TrimSpace(*u.UpdateExpression) == "REMOVE gpk, due" {
			once.Do(func() {
				_, redriveErr = rig.svc.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id})
				redriven = true
			})
		}
		return false
	}})
	c := mustClaim(t, failer, ref)
	if _, err := failer.Fail(ctx, c, control.FailParams{Cause: "boom"}); err != nil {
		t.Fatalf("fail: %v", err)
	}
	if !redriven || redriveErr != nil {
		t.Fatalf("the redrive before the removal: ran %v, err %v", redriven, redriveErr)
	}
	if task := getTask(t, rig, ref); task.State != sm.TaskReady {
		t.Fatalf("task %s after the redrive, want READY", task.State)
	}
	if !indexed(t, rig.e, ref) {
		t.Fatal("the redriven task lost its sweep-index entry to the failure's clean-up")
	}
}
