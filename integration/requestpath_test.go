package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// countingDB counts the store's DynamoDB requests by operation.
type countingDB struct {
	dynamo.API
	mu sync.Mutex
	n  map[string]int
}

func newCountingDB(e *env) *countingDB {
	return &countingDB{API: dynamodb.NewFromConfig(e.cfg), n: map[string]int{}}
}

func (c *countingDB) count(op string) int { c.mu.Lock(); defer c.mu.Unlock(); return c.n[op] }
func (c *countingDB) add(op string)       { c.mu.Lock(); c.n[op]++; c.mu.Unlock() }

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.add("GetItem")
	return c.API.GetItem(ctx, in, o...)
}

func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.add("BatchGetItem")
	return c.API.BatchGetItem(ctx, in, o...)
}

func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.add("PutItem")
	return c.API.PutItem(ctx, in, o...)
}

func (c *countingDB) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	c.add("BatchExecuteStatement")
	return c.API.BatchExecuteStatement(ctx, in, o...)
}

func (c *countingDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.add("TransactWriteItems")
	return c.API.TransactWriteItems(ctx, in, o...)
}

func rawState(t *testing.T, e *env, pk, sk string) string {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if out.Item == nil {
		return ""
	}
	return out.Item["st"].(*types.AttributeValueMemberS).Value
}

// Every copy of a job's state record is written with the job and ends in
// the transaction that ends it, as the job item's guarded transition
// decides: a refused end (the job already ended) changes none.
func TestJobStateRecordsEndWithTheJob(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		ev    sm.Event
		want  sm.JobState
		again sm.Event // a second end, refused
	}{
		{"cancel", sm.JobCancel, sm.JobCancelled, sm.JobSucceed},
		{"fail", sm.JobFail, sm.JobFailed, sm.JobCancel},
		{"succeed", sm.JobSucceed, sm.JobSucceeded, sm.JobFail},
	} {
		id := submitTo(t, e.r.Service, "jst-"+tc.name, oneStage("jst", "work", 1))
		copies := func(want sm.JobState) {
			t.Helper()
			for k := 0; k < dynamo.JobStateShards; k++ {
				if st := rawState(t, e, fmt.Sprintf("JST#%s#%d", id, k), "JST"); st != string(want) {
					t.Fatalf("%s: state copy %d is %q, want %s", tc.name, k, st, want)
				}
				if st, err := e.r.Store.JobStateShard(ctx, id, k); err != nil || st != want {
					t.Fatalf("%s: JobStateShard(%d) = %s, %v; want %s", tc.name, k, st, err, want)
				}
			}
		}
		copies(sm.JobRunning)
		if err := e.r.Store.JobEnd(ctx, id, tc.ev, "test", "", time.Now()); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		copies(tc.want)
		if err := e.r.Store.JobEnd(ctx, id, tc.again, "again", "", time.Now()); !errors.Is(err, sm.ErrInvalidTransition) {
			t.Fatalf("%s: second end %v, want ErrInvalidTransition", tc.name, err)
		}
		copies(tc.want)
	}
}

// JobState reads a small state copy, never the spec-bearing job item
// (billed by its size, up to 64 read units a consistent read); a job
// written before the copies existed is still read from its job item, and
// a job that does not exist is not found.
func TestJobStateIsNotReadFromTheJobItem(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	table := &e.r.Resources.Table
	k := func(pk, sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}
	}
	id := submitTo(t, e.r.Service, "jst-read", oneStage("jst", "work", 1))
	// Mark the job item so a read of it shows.
	if _, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: table, Key: k("JOB#"+id, "JOB"),
		UpdateExpression:          aws.String("SET st = :x"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":x": &types.AttributeValueMemberS{Value: "FROM-JOB-ITEM"}},
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 * dynamo.JobStateShards {
		if st, err := e.r.Store.JobState(ctx, id); err != nil || st != sm.JobRunning {
			t.Fatalf("JobState = %q, %v; want RUNNING from a state copy", st, err)
		}
	}
	// A job without copies (written before they existed).
	for s := 0; s < dynamo.JobStateShards; s++ {
		if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: table, Key: k(fmt.Sprintf("JST#%s#%d", id, s), "JST")}); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := e.r.Store.JobState(ctx, id); err != nil || st != "FROM-JOB-ITEM" {
		t.Fatalf("JobState of a job without copies = %q, %v; want its job item's", st, err)
	}
	if _, err := e.r.Store.JobState(ctx, "jnosuchjob"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("JobState of no job: %v, want ErrNotFound", err)
	}
}

// Materialization writes a chunk's task records as conditional PartiQL
// INSERTs, 25 to a request, after the chunk's ready marker: not a request
// per task, and not a transaction (which bills each put twice). A chunk
// that meets existing tasks (a repeated or overlapping materialization)
// leaves them as they are: no existing task is reset.
func TestMaterializationWritesTasksAsConditionalInserts(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := newCountingDB(e)
	store := dynamo.New(db, e.r.Resources.Table)
	mk := func(job string, lo, hi int) []domain.Task {
		var ts []domain.Task
		for p := lo; p < hi; p++ {
			// Tasks over an input are written at materialization (the
			// others are not: unwritten_test.go).
			ts = append(ts, domain.Task{Ref: domain.TaskRef{Job: job, Partition: p}, State: sm.TaskReady, MaxAttempts: 3, Updated: time.Now(),
				Input: &split.Split{Key: fmt.Sprintf("in/%d", p), End: 10}})
		}
		return ts
	}
	const job = "jmaterialize0001"
	due := time.Now().Add(time.Minute)
	if err := store.TaskPutMany(ctx, mk(job, 0, 250), due); err != nil {
		t.Fatal(err)
	}
	// Chunks of 99, 99 and 52: a marker each, and 4 + 4 + 3 batches.
	if tx, puts, batches := db.count("TransactWriteItems"), db.count("PutItem"), db.count("BatchExecuteStatement"); tx != 0 || puts != 3 || batches != 11 {
		t.Fatalf("250 tasks: %d transactions, %d puts and %d batches, want 0, 3 (markers) and 11", tx, puts, batches)
	}
	// Task 5 is claimed; a repeat of its chunk must not reset it.
	claimed, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: 5}, Token: "t5", Now: time.Now(), Lease: time.Minute, Grace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := store.TaskPutMany(ctx, mk(job, 0, 120), due); err != nil { // 0..99 exist; 100..119 exist
		t.Fatal(err)
	}
	if err := store.TaskPutMany(ctx, mk(job, 240, 300), due); err != nil { // 240..249 exist, 250..299 new
		t.Fatal(err)
	}
	got, err := store.TaskGet(ctx, claimed.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sm.TaskClaimed || got.Token != "t5" || got.Attempt != 1 {
		t.Fatalf("claimed task after a repeated materialization: %s token %q attempt %d; want it kept", got.State, got.Token, got.Attempt)
	}
	for _, p := range []int{0, 249, 250, 299} {
		if tk, err := store.TaskGet(ctx, domain.TaskRef{Job: job, Partition: p}); err != nil || tk.State != sm.TaskReady {
			t.Fatalf("task %d: %s, %v; want READY", p, tk.State, err)
		}
	}
}

// A task running when its job is cancelled by another process (the API)
// stops within two job-state TTLs and a read, not at its next heartbeat
// (lease/3: 20 s here), and no task of the job starts more than a TTL
// after the cancel.
func TestRunningTaskOfACancelledJobStopsWithinTheBound(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	var mu sync.Mutex
	started := map[int]time.Time{}
	stopped := make(chan time.Time, 4)
	var runs atomic.Int32
	reg.Register("block", func(ctx context.Context, tk *batchwork.Task) error {
		mu.Lock()
		started[tk.Partition] = time.Now()
		mu.Unlock()
		runs.Add(1)
		<-ctx.Done()
		stopped <- time.Now()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	p := e.r.Poller()
	p.Slots = 1
	go func() { defer close(done); _ = p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	id := e.submitAs("tester", "stopbound", []byte(`{"name":"stopbound","lease":"60s","stages":[{"name":"s","task":"block","partitions":{"count":3}}]}`))
	waitFor(t, time.Minute, "a task to start", func() bool { return runs.Load() >= 1 })
	// Another process cancels: the executor's cache learns it only by
	// reading.
	api := newService(e, control.Config{}, e.r.Store, e.r.Queue, newTestClock(), e.r.Executor.Log)
	if _, err := api.Cancel(context.Background(), "tester", id); err != nil {
		t.Fatal(err)
	}
	cancelled := time.Now()
	bound := 2*control.DefaultJobStateTTL + time.Second // two TTLs and a read
	select {
	case at := <-stopped:
		if took := at.Sub(cancelled); took > bound {
			t.Fatalf("the running task stopped %s after the cancel, want within %s", took, bound)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("the running task was not stopped within 15 s of the cancel (its heartbeat comes at 20 s); want within %s", bound)
	}
	time.Sleep(3 * time.Second) // the other messages come and are refused
	mu.Lock()
	defer mu.Unlock()
	for part, at := range started {
		if at.After(cancelled.Add(control.DefaultJobStateTTL)) {
			t.Errorf("task %d started %s after the cancel, more than a TTL", part, at.Sub(cancelled))
		}
	}
}
