package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

func readyTasks(job string, n int) []batch.Task {
	ts := make([]batch.Task, n)
	for p := range ts {
		ts[p] = batch.Task{Ref: batch.TaskRef{Job: job, Partition: p}, State: sm.TaskReady, MaxAttempts: 3, Updated: time.Now()}
	}
	return ts
}

// indexed says whether a task item carries a sweep index entry.
func indexed(t *testing.T, e *env, ref batch.TaskRef) bool {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("TASK#%s#%d#%d", ref.Job, ref.Stage, ref.Partition/dynamo.TaskBucket)},
			"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("%06d", ref.Partition)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item == nil {
		t.Fatalf("task %s not found", ref)
	}
	_, ok := out.Item[dynamo.Schema.DueShard]
	return ok
}

// A task enters the sweep index at its claim and leaves it at its commit:
// materialization writes one ready marker per chunk instead of an entry
// per task, so the index takes about 3 write units per task (the claim's
// put, the commit's removal in its transaction), not 5 (an entry put at
// materialization and moved by the claim, a delete and a put).
func TestTasksEnterTheSweepIndexAtTheirClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	var rec loadmodel.Recorder
	cfg := e.cfg.Copy()
	rec.Install(&cfg)
	if err := rec.DescribeTable(ctx, dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table); err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(dynamodb.NewFromConfig(cfg), e.r.Resources.Table)
	const job, n = "jreadyindex00001", 200
	shards := dynamo.ShardCount(n)
	if err := store.PutShards(ctx, job, 0, n, shards); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTasks(ctx, readyTasks(job, n), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	first := batch.TaskRef{Job: job, Partition: 3}
	if indexed(t, e, first) {
		t.Fatalf("task %s is in the sweep index before its claim", first)
	}
	now := time.Now()
	for p := range n {
		ref := batch.TaskRef{Job: job, Partition: p}
		tok := fmt.Sprintf("tok%d", p)
		if _, err := store.ClaimTask(ctx, dynamo.ClaimParams{Ref: ref, Token: tok, Now: now, Lease: time.Minute, Grace: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if p == first.Partition && !indexed(t, e, first) {
			t.Fatalf("task %s is not in the sweep index after its claim", first)
		}
		if _, err := store.CommitTask(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: tok, Now: now}, Attempt: 1, Shards: shards}); err != nil {
			t.Fatal(err)
		}
	}
	if indexed(t, e, first) {
		t.Fatalf("task %s is still in the sweep index after its commit", first)
	}
	snap := rec.Snapshot()
	index := 0.0
	for k, v := range snap.Keys {
		if k.Service == "DynamoDB" && strings.HasSuffix(k.Resource, "/"+dynamo.DueIndex) {
			index += v.WCU
		}
	}
	if per := index / n; per > 3.5 {
		t.Fatalf("the sweep index took %.2f write units per task, want at most 3.5 (claim 1, commit 2, markers)", per)
	}
	t.Logf("sweep index: %.2f write units per task; all DynamoDB: %.2f", index/n, snap.Totals().WCU/n)
}

// A due ready marker expands into the tasks of its chunk that still wait
// unclaimed, each put in the index on the way, and leaves the index: the
// sweep then finds those tasks as it finds any other.
func TestReadyMarkerExpandsToWaitingTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	const job, n, claimed = "jreadyexpand0001", 150, 10
	now := time.Now()
	if err := store.PutTasks(ctx, readyTasks(job, n), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	for p := range claimed {
		if _, err := store.ClaimTask(ctx, dynamo.ClaimParams{Ref: batch.TaskRef{Job: job, Partition: p}, Token: "t", Now: now, Lease: time.Minute, Grace: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	due := func(at time.Time) []int {
		var ps []int
		for shard := range dynamo.DueShards {
			items, err := store.DueItems(ctx, shard, at, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				if it.Kind == dynamo.DueTask && it.Job == job {
					ps = append(ps, it.Task.Partition)
				}
			}
		}
		slices.Sort(ps)
		return ps
	}
	var want []int
	for p := claimed; p < n; p++ {
		want = append(want, p)
	}
	if got := due(now); !slices.Equal(got, want) {
		t.Fatalf("due tasks from the markers: %v, want the %d unclaimed (%d..%d), each once", got, len(want), claimed, n-1)
	}
	// The markers are out of the index; the waiting tasks are in it, each
	// on its own, due a little later (not twice in one sweep run).
	if got := due(now); len(got) != 0 {
		t.Fatalf("due tasks on a second read at once: %v, want none", got)
	}
	if got := due(now.Add(dynamo.ExpandedRecheck)); !slices.Equal(got, want) {
		t.Fatalf("due tasks a recheck later: %v, want the same %d from their own entries", got, len(want))
	}
	out, err := dynamodb.NewFromConfig(e.cfg).Query(ctx, &dynamodb.QueryInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "RDY#" + job + "#0#0"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Items) != 2 {
		t.Fatalf("%d ready markers, want 2 (chunks of 99 and 51)", len(out.Items))
	}
	for _, it := range out.Items {
		if _, ok := it[dynamo.Schema.DueShard]; ok {
			t.Fatalf("ready marker %v is still in the sweep index after its expansion", it["sk"])
		}
	}
}
