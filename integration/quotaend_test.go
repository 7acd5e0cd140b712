package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
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
				if err := e.r.Store.StageChargePlan(ctx, dynamo.PlanChargeParams{Job: id, Stage: 1, Tasks: 4, MaxTasks: 100}); err != nil {
					t.Errorf("charge: %v", err)
				}
			})
		}
		return false
	}})
	if _, err := e.r.Service.Cancel(ctx, "dora", id); err != nil {
		t.Fatal(err)
	}
	u, err := e.r.Store.OwnerQuotaUse(ctx, "dora")
	if err != nil {
		t.Fatal(err)
	}
	if u.Tasks != 0 || u.ActiveJobs != 0 {
		t.Fatalf("dora's quota use after the cancel: %+v, want nothing counted", u)
	}
}

// A job's end outlasts a stream of charges: every try of the end finds a
// charge (a stage's plan, a split) landed after its read. The end gave up
// after a few tries as if someone else had ended the job, so a cancel
// answered 409 and a task's failure left its job RUNNING with its stages
// ended.
func TestJobEndOutlastsAStreamOfCharges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := testTimings
	cfg.Quotas = control.Quotas{Tasks: control.OwnerLimits{Default: 1000}}
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, control: &cfg, faults: inj})
	const charges = 12
	stages := `{"name":"a","task":"none","partitions":{"count":1}}`
	for i := range charges {
		stages += fmt.Sprintf(`,{"name":"b%d","task":"none","after":["a"],"partitions":{"input":{"prefix":"inputs:later/"}}}`, i)
	}
	id := e.submitAs("dora", "stream", []byte(`{"name":"stream","stages":[`+stages+`]}`))
	var mu sync.Mutex
	charged := 0
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		if !ok || len(tx.TransactItems) == 0 || tx.TransactItems[0].Update == nil ||
			!strings.Contains(aws.ToString(tx.TransactItems[0].Update.UpdateExpression), "#end = :now") {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if charged < charges {
			charged++
			// Another stage planned just now, after the end read its count.
			if err := e.r.Store.StageChargePlan(ctx, dynamo.PlanChargeParams{Job: id, Stage: charged, Tasks: 2, MaxTasks: 1000}); err != nil {
				t.Errorf("charge %d: %v", charged, err)
			}
		}
		return false
	}})
	if _, err := e.r.Service.Cancel(ctx, "dora", id); err != nil {
		t.Fatalf("cancel during %d charges: %v", charges, err)
	}
	if st, err := e.r.Store.JobState(ctx, id); err != nil || st != sm.JobCancelled {
		t.Fatalf("job after the cancel: %s %v, want CANCELLED", st, err)
	}
	u, err := e.r.Store.OwnerQuotaUse(ctx, "dora")
	if err != nil {
		t.Fatal(err)
	}
	if u.Tasks != 0 || u.ActiveJobs != 0 {
		t.Fatalf("dora's quota use after the cancel: %+v, want nothing counted", u)
	}
}
