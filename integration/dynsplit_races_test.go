package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A split raises a completion counter, so the counters are no longer only
// counted down, and a read of them that is not one snapshot can add up to
// zero while a task has not committed: the counter a new task lands on
// read before the split, the giver's read after the giver committed.
// BatchGetItem promises no snapshot (and may leave keys unprocessed, to
// be asked for again); here it does exactly that, with the split and the
// giver's commit in between. Progress must not call the stage complete
// while the split's task is READY: the stage would complete without it,
// and its bytes would be missing from the stage's output.
func TestDynamicSplitProgressTornRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	objects := map[string]string{}
	for k := range 65 { // 65 tasks: two completion counters (64 tasks each)
		objects[fmt.Sprintf("data/%03d.txt", k)] = strings.Repeat("a line\n", 8)
	}
	bucket := inputBucket(t, objects)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, inputBuckets: []string{bucket}})
	id := e.submitAs("tester", "torn", fmt.Appendf(nil, `{"name":"torn","stages":[
		{"name":"s","task":"none","partitions":{"input":{"prefix":"s3://%s/data/","splitSize":"1MiB","dynamicSplit":true}}}]}`, bucket))
	st, err := e.r.Store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 65 || st.Shards != 2 || !st.Materialized {
		t.Fatalf("stage %+v, want 65 materialized tasks on 2 counters", st)
	}
	for p := 1; p < 65; p++ {
		c, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.r.Service.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatal(err)
		}
	}
	giver, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	in := *giver.Task.Input
	at, give := split.Carve(in, in.Start, 1, 1)
	if len(give) != 1 || dynamo.ShardOf(st.Total, st.Shards) == dynamo.ShardOf(0, st.Shards) {
		t.Fatalf("carve %d %v; want one piece, numbered onto the other counter", at, give)
	}

	// A store whose first counter read gets the new task's counter only
	// (before the split) and leaves the giver's unprocessed, to be read
	// after the split and the giver's commit.
	table := e.r.Resources.Table
	giverCounter := fmt.Sprintf("CNT#%s#0#%d", id, dynamo.ShardOf(0, st.Shards))
	var torn atomic.Bool
	var between error
	cfg := e.cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("tornRead", func(ctx context.Context, mi middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			bin, ok := mi.Parameters.(*dynamodb.BatchGetItemInput)
			if awsmiddleware.GetOperationName(ctx) != "BatchGetItem" || !ok || torn.Load() {
				return next.HandleInitialize(ctx, mi)
			}
			ka := bin.RequestItems[table]
			var keep, later []map[string]types.AttributeValue
			for _, k := range ka.Keys {
				if pk, _ := k["pk"].(*types.AttributeValueMemberS); pk != nil && pk.Value == giverCounter {
					later = append(later, k)
				} else {
					keep = append(keep, k)
				}
			}
			if len(later) == 0 {
				return next.HandleInitialize(ctx, mi)
			}
			torn.Store(true)
			ka.Keys = keep
			bin.RequestItems = map[string]types.KeysAndAttributes{table: ka}
			out, md, err := next.HandleInitialize(ctx, mi)
			if err != nil {
				return out, md, err
			}
			// Between the two reads: the split, then the giver's commit.
			_, between = e.r.Store.TaskSplit(ctx, dynamo.SplitTaskParams{
				Ref: giver.Task.Ref, Token: giver.Task.Token, Attempt: giver.Task.Attempt,
				Input: in, At: at, Give: give, MaxAttempts: 3, MaxTotal: 1000, Now: time.Now(), Due: time.Now().Add(time.Minute),
			})
			if between == nil {
				between = e.r.Service.Commit(ctx, giver, control.CommitResult{Outputs: 0})
			}
			res := out.Result.(*dynamodb.BatchGetItemOutput)
			res.UnprocessedKeys = map[string]types.KeysAndAttributes{table: {Keys: later, ConsistentRead: aws.Bool(true)}}
			return out, md, nil
		}), middleware.After)
	})
	store := dynamo.New(dynamodb.NewFromConfig(cfg), table)

	p, err := store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if between != nil || !torn.Load() {
		t.Fatalf("split and commit between the reads: %v (torn %v)", between, torn.Load())
	}
	tk, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: st.Total})
	if err != nil {
		t.Fatal(err)
	}
	if tk.State != sm.TaskReady {
		t.Fatalf("the split's task is %s, want READY", tk.State)
	}
	if p.Complete() || p.Left != 1 {
		t.Fatalf("progress %+v with the split's task READY; want 1 left, not complete", p)
	}
}

// A split that fails before its transaction (here the straggler check's
// read of the stage's durations, after the SDK's retries) wrote nothing:
// it is a refusal, so the giver reads on to its old end. Any other error
// means the outcome is unknown, and the executor abandons the attempt
// (executor/dynsplit.go), which for a failed read wastes the attempt and
// leaves the straggler's task waiting for its lease to run out.
func TestDynamicSplitReadErrorRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bucket := inputBucket(t, map[string]string{"data/big.txt": strings.Repeat("one line of text\n", 40000)})
	inj := faults.New(1)
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, inputBuckets: []string{bucket}, faults: inj})
	id := e.submitAs("tester", "prewrite", fmt.Appendf(nil, `{"name":"prewrite","stages":[
		{"name":"s","task":"none","partitions":{"input":{"prefix":"s3://%s/data/","splitSize":"1MiB","dynamicSplit":true}}}]}`, bucket))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	c, err := e.r.Service.Claim(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	in := *c.Task.Input
	at, give := split.Carve(in, 100000, 3, 1<<16)
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "BatchGetItem", Kind: faults.ServerError, Count: 50})
	_, err = e.r.Service.SplitTask(ctx, c, control.SplitRequest{Input: in, At: at, Give: give, Ran: time.Minute})
	inj.SetEnabled(false)
	if inj.Total() == 0 {
		t.Fatal("no fault injected")
	}
	if !errors.Is(err, control.ErrSplitRefused) {
		t.Fatalf("split whose durations read failed: %v, want refused", err)
	}
	tk, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.r.Store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	if *tk.Input != in || st.Total != 1 {
		t.Fatalf("after a refused split: task reads %+v, stage has %d tasks; want %+v and 1", tk.Input, st.Total, in)
	}
}

// Two tasks of a stage split at once: the one whose transaction lands
// second was built on the stage's old total, is cancelled by the total's
// guard and numbers its pieces after the other's. No partition number is
// used twice, every piece is a task reading what was given, and the
// stage's total and counters count them all.
func TestDynamicSplitConcurrentSplitsRenumber(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	body := strings.Repeat("one line of text\n", 20000) // 340,000 bytes
	bucket := inputBucket(t, map[string]string{"data/a.txt": body, "data/b.txt": body})
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true, inputBuckets: []string{bucket}})
	id := e.submitAs("tester", "concurrent", fmt.Appendf(nil, `{"name":"concurrent","stages":[
		{"name":"s","task":"none","partitions":{"input":{"prefix":"s3://%s/data/","splitSize":"1MiB","dynamicSplit":true}}}]}`, bucket))
	var claims [2]domain.Task
	var params [2]dynamo.SplitTaskParams
	for p := range 2 {
		c, err := e.r.Service.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		claims[p] = c.Task
		in := *c.Task.Input
		at, give := split.Carve(in, 1000, 2+p, 1<<10)
		params[p] = dynamo.SplitTaskParams{Ref: c.Task.Ref, Token: c.Task.Token, Attempt: c.Task.Attempt,
			Input: in, At: at, Give: give, MaxAttempts: 3, MaxTotal: 1000, Now: time.Now(), Due: time.Now().Add(time.Minute)}
	}
	// Task 1's split is built on the total 2; task 0's lands just before it.
	var raced atomic.Bool
	var first0 int
	var err0 error
	cfg := e.cfg.Copy()
	cfg.APIOptions = append(cfg.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("raceSplit", func(ctx context.Context, mi middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetOperationName(ctx) == "TransactWriteItems" && !raced.Swap(true) {
				first0, err0 = e.r.Store.TaskSplit(ctx, params[0])
			}
			return next.HandleInitialize(ctx, mi)
		}), middleware.After)
	})
	store := dynamo.New(dynamodb.NewFromConfig(cfg), e.r.Resources.Table)
	first1, err := store.TaskSplit(ctx, params[1])
	if err != nil || err0 != nil {
		t.Fatalf("splits: %v, %v", err0, err)
	}
	n0, n1 := len(params[0].Give), len(params[1].Give)
	if first0 != 2 || first1 != 2+n0 {
		t.Fatalf("pieces numbered from %d and %d, want 2 and %d", first0, first1, 2+n0)
	}
	st, err := e.r.Store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 + n0 + n1; st.Total != want || p.Left != want {
		t.Fatalf("stage: %d tasks, %d left; want %d and %d", st.Total, p.Left, want, want)
	}
	for k := range n0 + n1 {
		want := params[0].Give
		i := k
		if k >= n0 {
			want, i = params[1].Give, k-n0
		}
		tk, err := e.r.Store.TaskGet(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: 2 + k})
		if err != nil {
			t.Fatal(err)
		}
		if tk.State != sm.TaskReady || *tk.Input != want[i] {
			t.Fatalf("task %d: %s reading %+v, want READY reading %+v", 2+k, tk.State, tk.Input, want[i])
		}
	}
	for p := range 2 {
		tk, err := e.r.Store.TaskGet(ctx, claims[p].Ref)
		if err != nil {
			t.Fatal(err)
		}
		if tk.Input.End != params[p].At {
			t.Fatalf("giver %d reads to %d, want %d", p, tk.Input.End, params[p].At)
		}
	}
}
