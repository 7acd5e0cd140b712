package integration

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// readyTasks are n tasks of job's stage 0 as materialization makes them
// for a stage partitioned by count: unwritten until claimed
// (sm.TaskUnwritten), their chunks' markers only.
func readyTasks(job string, n int) []domain.Task {
	ts := make([]domain.Task, n)
	now := time.Now()
	for p := range ts {
		ts[p] = domain.Task{Ref: domain.TaskRef{Job: job, Partition: p}, State: sm.TaskReady, MaxAttempts: 3, Updated: now}
	}
	return ts
}

// inputTasks are readyTasks that each read a split of an input, as a
// stage over an input prefix has them: written at materialization.
func inputTasks(job string, n int) []domain.Task {
	ts := readyTasks(job, n)
	for p := range ts {
		ts[p].Input = &split.Split{Key: fmt.Sprintf("in/%d", p), End: 10}
	}
	return ts
}

// putReadyStage writes a stage's shards counters (for total tasks) and
// its first n tasks, READY, their chunk's marker due at due.
func putReadyStage(t *testing.T, store *dynamo.Store, job string, total, shards, n int, due time.Time) {
	t.Helper()
	if err := store.ShardPut(context.Background(), job, 0, total, shards); err != nil {
		t.Fatal(err)
	}
	if err := store.TaskPutMany(context.Background(), readyTasks(job, n), due); err != nil {
		t.Fatal(err)
	}
}

// claimReady claims tasks 0..n-1 of job's stage 0, partition p's with
// token tok(p).
func claimReady(t *testing.T, store *dynamo.Store, job string, n int, tok func(p int) string, now time.Time) {
	t.Helper()
	for p := range n {
		ref := domain.TaskRef{Job: job, Partition: p}
		if _, err := store.TaskClaim(context.Background(), dynamo.ClaimParams{Ref: ref, Token: tok(p), Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
	}
}

// recordedStore is a store over e's table whose requests rec records
// (billed by the table's item sizes and indexes).
func recordedStore(t *testing.T, e *env) (*dynamo.Store, *loadmodel.Recorder) {
	t.Helper()
	rec := &loadmodel.Recorder{}
	cfg := e.cfg.Copy()
	rec.Install(&cfg)
	if err := rec.DescribeTable(context.Background(), dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table); err != nil {
		t.Fatal(err)
	}
	return dynamo.New(dynamodb.NewFromConfig(cfg), e.r.Resources.Table), rec
}

// indexed says whether a task item carries a sweep index entry.
func indexed(t *testing.T, e *env, ref domain.TaskRef) bool {
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

// markerIndexed says whether a ready marker of job's stage 0 is in the
// sweep index, by its sort key (first#end partition).
func markersIndexed(t *testing.T, e *env, job string) map[string]bool {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).Query(context.Background(), &dynamodb.QueryInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "RDY#" + job + "#0#0"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, it := range out.Items {
		_, in := it[dynamo.Schema.DueShard]
		got[it["sk"].(*types.AttributeValueMemberS).Value] = in
	}
	return got
}

// dueTasks is what the sweep finds due at at, for job: the partitions
// of its due task records, sorted (markers expanded on the way).
func dueTasks(t *testing.T, store *dynamo.Store, job string, at time.Time) []int {
	t.Helper()
	var ps []int
	for shard := range dynamo.DueShards {
		items, err := store.DueList(context.Background(), shard, at, 1000)
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

func span(lo, hi int) []int {
	var ps []int
	for p := lo; p < hi; p++ {
		ps = append(ps, p)
	}
	return ps
}

// A task its chunk's ready marker watches never enters the sweep index on
// the per-task path: its claim and heartbeats write its due time but no
// index entry, and its commit has none to remove. The index costs the
// chunk's marker only (it cost 3 write units per task when the claim put
// the task in the index and the commit's transaction took it out).
func TestClaimsAndCommitsWriteNoSweepIndexEntry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store, rec := recordedStore(t, e)
	const job, n = "jreadyindex00001", 200
	shards := dynamo.ShardCount(n)
	putReadyStage(t, store, job, n, shards, n, time.Now().Add(time.Hour))
	first := domain.TaskRef{Job: job, Partition: 3}
	now := time.Now()
	for p := range n {
		ref := domain.TaskRef{Job: job, Partition: p}
		tok := fmt.Sprintf("tok%d", p)
		if _, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: tok, Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		if p == first.Partition {
			if indexed(t, e, first) {
				t.Fatalf("task %s is in the sweep index after its claim", first)
			}
			if err := store.TaskHeartbeat(ctx, dynamo.HolderParams{Ref: ref, Token: tok, Now: now.Add(time.Second)}, time.Minute, time.Minute); err != nil {
				t.Fatal(err)
			}
			if indexed(t, e, first) {
				t.Fatalf("task %s is in the sweep index after a heartbeat", first)
			}
		}
		if _, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: tok, Now: now}, Attempt: 1, Shards: shards}); err != nil {
			t.Fatal(err)
		}
	}
	snap := rec.Snapshot()
	index := 0.0
	for k, v := range snap.Keys {
		if k.Service == "DynamoDB" && strings.HasSuffix(k.Resource, "/"+dynamo.DueIndex) {
			index += v.WCU
		}
	}
	if per := index / n; per > 0.1 {
		t.Fatalf("the sweep index took %.2f write units per task, want at most 0.1 (the chunks' markers)", per)
	}
	t.Logf("sweep index: %.3f write units per task; all DynamoDB: %.2f", index/n, snap.Totals().WCU/n)
}

// A due ready marker looks at its chunk: the tasks that still wait
// unclaimed go into the index on their own (the sweep resends them), the
// claimed ones stay with the marker, which is due again when the first of
// their leases (plus grace) ends; a lapsed lease then goes into the index
// (the sweep takes it over), and a marker with nothing left to watch
// leaves the index.
func TestReadyMarkerWatchesItsChunk(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	const job, n, claimed, committed = "jreadyexpand0001", 150, 10, 4
	shards := dynamo.ShardCount(n)
	if err := store.ShardPut(ctx, job, 0, n, shards); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := store.TaskPutMany(ctx, readyTasks(job, n), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	lease := time.Minute
	for p := range claimed {
		ref := domain.TaskRef{Job: job, Partition: p}
		if _, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: ref, Token: "t", Now: now, Lease: lease, Grace: lease, MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		if p < committed {
			if _, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: "t", Now: now}, Attempt: 1, Shards: shards}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got, want := dueTasks(t, store, job, now), span(claimed, n); !slices.Equal(got, want) {
		t.Fatalf("due tasks from the markers: %v, want the %d unclaimed (%d..%d), each once", got, len(want), claimed, n-1)
	}
	// The waiting tasks are in the index on their own, due a little later
	// (not twice in one sweep run).
	if got := dueTasks(t, store, job, now); len(got) != 0 {
		t.Fatalf("due tasks on a second read at once: %v, want none", got)
	}
	if got, want := dueTasks(t, store, job, now.Add(dynamo.ExpandedRecheck)), span(claimed, n); !slices.Equal(got, want) {
		t.Fatalf("due tasks a recheck later: %v, want the same %d from their own entries", got, len(want))
	}
	// The marker still watches the chunk's running tasks.
	if got, want := markersIndexed(t, e, job), map[string]bool{"000000#000150": true}; !maps.Equal(got, want) {
		t.Fatalf("ready markers in the index: %v, want %v", got, want)
	}
	// When the claims' leases and grace have ended unrenewed, the marker
	// hands those tasks to the index: the sweep takes them over.
	lapsed := now.Add(2*lease + time.Second)
	got := dueTasks(t, store, job, lapsed)
	for p := committed; p < claimed; p++ {
		if !slices.Contains(got, p) {
			t.Fatalf("due tasks after the leases lapsed: %v, want the claimed %d..%d among them", got, committed, claimed-1)
		}
	}
	if got, want := markersIndexed(t, e, job), map[string]bool{"000000#000150": false}; !maps.Equal(got, want) {
		t.Fatalf("ready markers in the index after every task left them: %v, want %v", got, want)
	}
}

// A task claimed while a marker's look reads it as waiting is not lost
// from sight: the look's index write is refused (the task is no longer
// READY), and the marker stays due, to look again and find the claim's
// lease when it lapses. (A look that took its marker out of the index
// anyway, as when claims put their own tasks in the index, left such a
// task watched by nothing.)
func TestReadyMarkerKeepsATaskClaimedDuringItsLook(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	clean, store, inj := hookedStores(e)
	const job, n, raced = "jreadyraced00001", 20, 7
	now := time.Now()
	if err := store.TaskPutMany(ctx, readyTasks(job, n), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	lease := time.Minute
	var fired atomic.Bool
	var claimErr error
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		if !ok || !strings.Contains(aws.ToString(u.UpdateExpression), "gpk") {
			return false
		}
		if sk, _ := u.Key["sk"].(*types.AttributeValueMemberS); sk != nil && sk.Value == fmt.Sprintf("%06d", raced) && fired.CompareAndSwap(false, true) {
			_, claimErr = clean.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: raced}, Token: "t", Now: now, Lease: lease, Grace: lease, MaxAttempts: 3})
		}
		return false // a hook, never a fault
	}})
	want := slices.DeleteFunc(span(0, n), func(p int) bool { return p == raced })
	if got := dueTasks(t, store, job, now); !fired.Load() || claimErr != nil || !slices.Equal(got, want) {
		t.Fatalf("due tasks from the marker: %v (claim during the look: %v, %v), want all but the raced %d", got, fired.Load(), claimErr, raced)
	}
	if got := markersIndexed(t, e, job); !got["000000#000020"] {
		t.Fatalf("the marker left the index with task %d claimed during its look and out of the index: %v", raced, got)
	}
	// A recheck later the marker reads the claim, and waits for its lease.
	dueTasks(t, store, job, now.Add(dynamo.ExpandedRecheck))
	if got := dueTasks(t, store, job, now.Add(2*lease+time.Second)); !slices.Contains(got, raced) {
		t.Fatalf("due tasks after the raced claim's lease lapsed: %v, want %d among them", got, raced)
	}
}

// A chunk's ready marker is written after its tasks: a look between the
// two (a materializer that stalled) finds no marker yet, where a marker
// written first would have found none of its tasks and left the index,
// and the tasks, once claimed, would have been watched by nothing.
func TestReadyMarkerWrittenAfterItsTasks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	clean, store, inj := hookedStores(e)
	const job, n = "jreadyorder00001", 30
	now := time.Now()
	var fired atomic.Bool
	inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(op string, _ any) bool {
		if (op == "BatchExecuteStatement" || op == "TransactWriteItems") && fired.CompareAndSwap(false, true) {
			dueTasks(t, clean, job, now.Add(time.Hour)) // the stalled writer's look, long after the marker's due
		}
		return false // a hook, never a fault
	}})
	if err := store.TaskPutMany(ctx, inputTasks(job, n), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if !fired.Load() {
		t.Fatal("no look ran while the chunk was written")
	}
	lease := time.Minute
	if _, err := clean.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: 0}, Token: "t", Now: now, Lease: lease, Grace: lease}); err != nil {
		t.Fatal(err)
	}
	if got := dueTasks(t, clean, job, now.Add(2*lease+time.Second)); !slices.Contains(got, 0) {
		t.Fatalf("due tasks after the claim's lease lapsed: %v, want 0 among them (the marker must watch it)", got)
	}
}

// hookedStores are two stores over e's table: clean, and store, whose
// requests pass through inj (a test's Match hooks run other writes, on
// clean, just before one of store's requests).
func hookedStores(e *env) (clean, store *dynamo.Store, inj *faults.Injector) {
	inj = faults.New(1)
	cfg := e.cfg.Copy()
	inj.Install(&cfg)
	return dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table), dynamo.New(dynamodb.NewFromConfig(cfg), e.r.Resources.Table), inj
}

// A marker the sweep cannot look at (here a malformed one; equally a
// chunk whose read fails) is an error beside the other records of its
// index shard, which the sweep still handles: one bad record used to fail
// its whole shard on every run.
func TestBadMarkerLeavesItsShardToTheSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	const job = "jbadmarker000001"
	now := time.Now()
	if err := e.r.Store.TaskPutMany(ctx, readyTasks(job, 3), now); err != nil {
		t.Fatal(err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "RDY#" + job + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "000000#000003"},
		},
	})
	if err != nil || out.Item == nil {
		t.Fatalf("the chunk's marker: %v %v", out, err)
	}
	gpk := out.Item[dynamo.Schema.DueShard].(*types.AttributeValueMemberS).Value
	var shard int
	if _, err := fmt.Sscanf(gpk, "D#%d", &shard); err != nil {
		t.Fatal(err)
	}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.r.Resources.Table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "RDY#not-a-marker"}, "sk": &types.AttributeValueMemberS{Value: "x"},
		dynamo.Schema.DueShard: &types.AttributeValueMemberS{Value: gpk},
		"due":                  &types.AttributeValueMemberN{Value: fmt.Sprint(now.Add(-time.Hour).UnixMilli())},
	}}); err != nil {
		t.Fatal(err)
	}
	items, err := e.r.Store.DueList(ctx, shard, now.Add(time.Second), 1000)
	if err == nil || !strings.Contains(err.Error(), "RDY#not-a-marker") {
		t.Fatalf("DueItems error %v, want one naming the bad marker", err)
	}
	var ps []int
	for _, it := range items {
		if it.Kind == dynamo.DueTask && it.Job == job {
			ps = append(ps, it.Task.Partition)
		}
	}
	slices.Sort(ps)
	if !slices.Equal(ps, []int{0, 1, 2}) {
		t.Fatalf("due tasks %v beside the bad marker, want [0 1 2]", ps)
	}
	// Reported once a day, not on every run.
	if _, err := e.r.Store.DueList(ctx, shard, now.Add(time.Hour), 1000); err != nil {
		t.Fatalf("the next run reported %v again", err)
	}
}
