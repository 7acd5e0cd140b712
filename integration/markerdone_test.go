package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The requests of the store's reads and writes that countingDB does not
// count in requestpath_test.go.
func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.add("Query")
	return c.API.Query(ctx, in, o...)
}

func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.add("UpdateItem")
	return c.API.UpdateItem(ctx, in, o...)
}

// The ready markers of a COMPLETED stage fall due together, StuckAfter
// after their chunks; their looks take them out of the index after one
// read of the stage, without reading the chunks' tasks or the counters
// (the completion proves every task committed and counted). Each look
// reading its chunk and its counters cost a bench's no-op task 0.04
// requests. Their keys spread them over the index shards, and the run
// removes them all in one transaction after its walk, not one write each
// (0.01 requests a task).
func TestMarkersOfACompletedStageLeaveTheIndexUnread(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	const n = 350 // four chunks, so four markers
	id := submitTo(t, rig.svc, "done", fmt.Sprintf(`{"name":"done","stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, n))
	for p := range n {
		c, err := rig.svc.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		if err != nil {
			t.Fatalf("claim %d: %v", p, err)
		}
		if err := rig.svc.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatalf("commit %d: %v", p, err)
		}
	}
	if got := jobState(t, rig.svc, id).State; got != string(sm.JobSucceeded) {
		t.Fatalf("job %s after every commit, want SUCCEEDED", got)
	}
	db := newCountingDB(rig.e)
	store := dynamo.New(db, rig.e.r.Resources.Table)
	at := time.Now().Add(time.Hour) // every marker due
	for shard := range dynamo.DueShards {
		items, err := store.DueList(ctx, shard, at, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 0 {
			t.Fatalf("index shard %d hands the sweep %v, want nothing", shard, items)
		}
	}
	if got := db.count("UpdateItem") + db.count("TransactWriteItems"); got != 0 {
		t.Fatalf("%d writes in the index during the walk, want none before DueRemoveDone", got)
	}
	if err := store.DueRemoveDone(ctx); err != nil {
		t.Fatal(err)
	}
	if u, tx := db.count("UpdateItem"), db.count("TransactWriteItems"); u != 0 || tx != 1 {
		t.Fatalf("removing 4 markers: %d updates and %d transactions, want one transaction", u, tx)
	}
	writes := 1
	if q, g, b := db.count("Query"), db.count("GetItem"), db.count("BatchGetItem"); q != dynamo.DueShards || g != 1 || b != 0 {
		t.Fatalf("looks at a completed stage's markers: %d queries, %d gets and %d batch reads, want %d (the index shards), 1 (the stage) and 0",
			q, g, b, dynamo.DueShards)
	}
	// Out of the index: the next run finds nothing and writes nothing.
	for shard := range dynamo.DueShards {
		if _, err := store.DueList(ctx, shard, at, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.DueRemoveDone(ctx); err != nil {
		t.Fatal(err)
	}
	if got := db.count("UpdateItem") + db.count("TransactWriteItems"); got != writes {
		t.Fatalf("a second run wrote %d more times in the index, want none", got-writes)
	}
	if got := len(markedPartitions(t, rig.e, id, 0)); got != n {
		t.Fatalf("the markers' items cover %d partitions, want %d (they stay until the job's records go)", got, n)
	}
}

// A stage's completion counters are created 25 to a request, and a
// repeated creation (a materialization run again after counts) leaves
// every counter as it is.
func TestCountersCreatedInBatchesAreNeverReset(t *testing.T) {
	t.Parallel()
	e := newEnv(t, nil, envOptions{noRun: true})
	ctx := context.Background()
	db := newCountingDB(e)
	store := dynamo.New(db, e.r.Resources.Table)
	const job, total = "jcounterbatch001", 2000
	shards := dynamo.ShardCount(total)
	if err := store.ShardPut(ctx, job, 0, total, shards); err != nil {
		t.Fatal(err)
	}
	if b, p := db.count("BatchExecuteStatement"), db.count("PutItem"); b != (shards+24)/25 || p != 0 {
		t.Fatalf("%d counters: %d batches and %d puts, want %d and 0", shards, b, p, (shards+24)/25)
	}
	var ps []dynamo.CommitParams
	for p := range 10 {
		ps = append(ps, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: domain.TaskRef{Job: job, Partition: p}}, Shards: shards})
	}
	if _, err := store.ShardCountCommits(ctx, ps); err != nil {
		t.Fatal(err)
	}
	if err := store.ShardPut(ctx, job, 0, total, shards); err != nil {
		t.Fatal(err)
	}
	for k, size := range dynamo.ShardSizes(total, shards) {
		left, err := store.ShardLeft(ctx, job, 0, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := size - map[bool]int{true: 10}[k == 0]; left != want {
			t.Fatalf("counter %d holds %d after the second creation, want %d", k, left, want)
		}
	}
}

// The run's removal of a completed stage's markers stays conditional on
// the due time its walk read, as each marker's own removal was: a marker
// written again meanwhile (a repeated chunk) refuses the transaction, the
// others are then removed one by one, and the rewritten one stays in the
// index until a later run finds it due.
func TestDoneMarkerWrittenAgainStaysInTheIndex(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	const n = 350 // four markers
	id := submitTo(t, rig.svc, "doneagain", fmt.Sprintf(`{"name":"doneagain","stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, n))
	for p := range n {
		c, err := rig.svc.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		if err != nil {
			t.Fatalf("claim %d: %v", p, err)
		}
		if err := rig.svc.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatalf("commit %d: %v", p, err)
		}
	}
	db := newCountingDB(rig.e)
	store := dynamo.New(db, rig.e.r.Resources.Table)
	walk := func(at time.Time) {
		t.Helper()
		for shard := range dynamo.DueShards {
			if _, err := store.DueList(ctx, shard, at, 1000); err != nil {
				t.Fatal(err)
			}
		}
		if err := store.DueRemoveDone(ctx); err != nil {
			t.Fatal(err)
		}
	}
	raw := dynamodb.NewFromConfig(rig.e.cfg)
	pk := fmt.Sprintf("RDY#%s#0#1", id) // the second chunk's marker
	out, err := raw.Query(ctx, &dynamodb.QueryInput{TableName: &rig.e.r.Resources.Table,
		KeyConditionExpression:    aws.String("pk = :p"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: pk}}})
	if err != nil || len(out.Items) != 1 {
		t.Fatalf("marker %s: %d items, %v", pk, len(out.Items), err)
	}
	mkey := map[string]types.AttributeValue{"pk": out.Items[0]["pk"], "sk": out.Items[0]["sk"]}
	inIndex := func() bool {
		t.Helper()
		got, err := raw.GetItem(ctx, &dynamodb.GetItemInput{TableName: &rig.e.r.Resources.Table, Key: mkey, ConsistentRead: aws.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		return got.Item["gpk"] != nil
	}

	at := time.Now().Add(time.Hour) // every marker due
	for shard := range dynamo.DueShards {
		if _, err := store.DueList(ctx, shard, at, 1000); err != nil {
			t.Fatal(err)
		}
	}
	later := at.Add(time.Hour)
	if _, err := raw.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: &rig.e.r.Resources.Table, Key: mkey,
		UpdateExpression: aws.String("SET due = :d"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":d": &types.AttributeValueMemberN{Value: fmt.Sprint(later.UnixMilli())}}}); err != nil {
		t.Fatal(err)
	}
	if err := store.DueRemoveDone(ctx); err != nil {
		t.Fatal(err)
	}
	if tx, u := db.count("TransactWriteItems"), db.count("UpdateItem"); tx != 1 || u != 4 {
		t.Fatalf("a refused batch: %d transactions and %d updates, want 1 and 4 (each marker on its own)", tx, u)
	}
	if !inIndex() {
		t.Fatal("the marker written again left the index")
	}
	if got := len(markedPartitions(t, rig.e, id, 0)); got != n {
		t.Fatalf("the markers' items cover %d partitions, want %d", got, n)
	}
	walk(at) // not due yet: stays
	if !inIndex() {
		t.Fatal("the marker written again left the index before its due time")
	}
	walk(later.Add(time.Minute))
	if inIndex() {
		t.Fatal("the marker written again is still in the index after a run past its due time")
	}
}
