package integration

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A finished task's message can lapse before its executor's delete round
// (a part batch waits two rounds), and another executor's claim, refused
// with ErrCommitted, counts the task (ShardEnsureCounted, no cost) before
// the committer's round writes its batched counts. The committer's batch
// then finds that partition counted and writes the rest without it
// (countBatch); the job's pending cost that attachCost gave the batch's
// first count must not go with it. Store level: the recovery's count
// first, then the committer's batch whose first count carries the cost.
func TestBatchedCountKeepsCostOfATaskCountedElsewhere(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, envOptions{noRun: true})
	ctx := context.Background()
	store := e.r.Store
	const job, total = "jcountcost00001", 20
	if err := store.ShardPut(ctx, job, 0, total, 1); err != nil {
		t.Fatal(err)
	}
	p := func(n int) dynamo.CommitParams {
		return dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: job, Partition: n}}, Shards: 1}
	}
	// The redelivered message's refused claim counts partition 0 (as
	// ShardEnsureCounted does: no cost).
	if _, err := store.ShardCountCommits(ctx, []dynamo.CommitParams{p(0)}); err != nil {
		t.Fatal(err)
	}
	// The committer's round: partition 0 first, with the job's pending
	// cost (attachCost), and partition 1.
	first := p(0)
	first.Cost = cost.Counts{DynamoRequests: 100}
	if _, err := store.ShardCountCommits(ctx, []dynamo.CommitParams{first, p(1)}); err != nil {
		t.Fatal(err)
	}
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(e.r.Resources.Table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "CNT#" + job + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "CNT"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	left, _ := out.Item["left"].(*types.AttributeValueMemberN)
	req, _ := out.Item["c_ddbReq"].(*types.AttributeValueMemberN)
	if req == nil || req.Value != "100" {
		t.Fatalf("counter after the batch: left %v, ddbReq %v; want the job's 100 requests of cost kept (the committer's pending cost dropped with the partition counted elsewhere)", left, req)
	}
}

// A batched count's cost is added once whichever way its partitions were
// counted: a retry of the committer's own batch whose answer was lost
// (all counted, by its own write) adds nothing again, and a batch counted
// wholly elsewhere adds its cost on its own.
func TestBatchedCountCostIsAddedOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, envOptions{noRun: true})
	ctx := context.Background()
	store := e.r.Store
	db := dynamodb.NewFromConfig(e.cfg)
	for i, tc := range []struct {
		name      string
		elsewhere []int // partitions the recovery counts first (no cost)
		rounds    int   // the committer's batch, sent this many times
	}{
		{"a lost answer's retry", nil, 2},
		{"all counted elsewhere", []int{0, 1}, 1},
		{"counted elsewhere, then a retry", []int{0}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := "jcountcost1000" + string(rune('a'+i))
			if err := store.ShardPut(ctx, job, 0, 20, 1); err != nil {
				t.Fatal(err)
			}
			p := func(n int) dynamo.CommitParams {
				return dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: job, Partition: n}}, Shards: 1}
			}
			for _, n := range tc.elsewhere {
				if _, err := store.ShardCountCommits(ctx, []dynamo.CommitParams{p(n)}); err != nil {
					t.Fatal(err)
				}
			}
			for range tc.rounds {
				first := p(0)
				first.Cost = cost.Counts{DynamoRequests: 100}
				if _, err := store.ShardCountCommits(ctx, []dynamo.CommitParams{first, p(1)}); err != nil {
					t.Fatal(err)
				}
			}
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: aws.String(e.r.Resources.Table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "CNT#" + job + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "CNT"},
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			left, _ := out.Item["left"].(*types.AttributeValueMemberN)
			req, _ := out.Item["c_ddbReq"].(*types.AttributeValueMemberN)
			if left == nil || left.Value != "18" || req == nil || req.Value != "100" {
				t.Fatalf("counter: left %v, ddbReq %v; want 18 left and the batch's 100 requests of cost once", left, req)
			}
		})
	}
}
