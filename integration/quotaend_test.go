package integration

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A plan's charge that lands between a job's end reading its count and
// the end's transaction is given back with the rest: the end is held to
// the count it read and reads again, so the owner's counter returns to 0.
func TestQuotaChargeRacingTheEndIsGivenBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testTimings
	cfg.Quotas = control.Quotas{Tasks: control.OwnerLimits{Default: 100}}
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &cfg, faults: inj})
	id := e.submitAs("dora", "race", []byte(`{"name":"race","stages":[
	  {"name":"a","task":"none","partitions":{"count":1}},
	  {"name":"b","task":"none","after":["a"],"partitions":{"input":{"prefix":"inputs:later/"}}}]}`))
	var once sync.Once
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		if ok && len(tx.TransactItems) > 0 && tx.TransactItems[0].Update != nil &&
			strings.Contains(aws.ToString(tx.TransactItems[0].Update.UpdateExpression), "#end = :now") {
			once.Do(func() {
				// Stage b planned 5 tasks just now, after the end read.
				if err := e.r.Store.ChargeStagePlan(ctx, dynamo.PlanChargeParams{Job: id, Stage: 1, Tasks: 4, MaxTasks: 100}); err != nil {
					t.Errorf("charge: %v", err)
				}
			})
		}
		return false
	}})
	if _, err := e.r.Service.Cancel(ctx, "dora", id); err != nil {
		t.Fatal(err)
	}
	u, err := e.r.Store.QuotaUse(ctx, "dora")
	if err != nil {
		t.Fatal(err)
	}
	if u.Tasks != 0 || u.ActiveJobs != 0 {
		t.Fatalf("dora's quota use after the cancel: %+v, want nothing counted", u)
	}
}
