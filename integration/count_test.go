package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

func sameToken(int) string { return "tok" }

// countWrite matches the count of a commit on a counter shard.
func countWrite(op string, in any) bool {
	u, ok := in.(*dynamodb.UpdateItemInput)
	if !ok || op != "UpdateItem" {
		return false
	}
	pk, _ := u.Key["pk"].(*types.AttributeValueMemberS)
	return pk != nil && strings.HasPrefix(pk.Value, "CNT#")
}

// A commit is the task's guarded write and its count, one write unit
// each, and no transaction (which billed 2 units per item: 4).
func TestCommitIsTwoSingleItemWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store, rec := recordedStore(t, e)
	const job, n = "jcommitwrites001", 200
	shards := dynamo.ShardCount(n)
	putReadyStage(t, e.r.Store, job, n, shards, n, time.Now().Add(time.Hour))
	now := time.Now()
	claimReady(t, e.r.Store, job, n, func(p int) string { return fmt.Sprint("tok", p) }, now)
	for p := range n {
		ref := domain.TaskRef{Job: job, Partition: p}
		if _, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: fmt.Sprint("tok", p), Now: now},
			Attempt: 1, Shards: shards, RecordsIn: 3, RecordsOut: 2, Duration: time.Second}); err != nil {
			t.Fatal(err)
		}
	}
	snap := rec.Snapshot()
	if tx := snap.Ops["DynamoDB.TransactWriteItems"].Requests; tx != 0 {
		t.Errorf("%d commit transactions, want none", tx)
	}
	if per := snap.Totals().WCU / n; per > 2.01 {
		t.Errorf("a commit took %.2f write units, want 2 (the task and its count)", per)
	}
	if per := float64(snap.Totals().Requests["DynamoDB"]) / n; per > 2 {
		t.Errorf("a commit took %.2f requests, want 2", per)
	}
	prog := progressOf(t, e, job, n, shards)
	if prog.Committed != n || prog.Left != 0 {
		t.Fatalf("progress %+v, want all %d committed", prog, n)
	}
}

// progressOf sums a stage's counters (without the stage record that
// Progress reads too).
func progressOf(t *testing.T, e *env, job string, total, shards int) domain.Progress {
	t.Helper()
	p := domain.Progress{Total: total}
	for k := range shards {
		left, err := e.r.Store.ShardLeft(context.Background(), job, 0, k)
		if err != nil {
			t.Fatal(err)
		}
		p.Left += left
	}
	p.Committed = total - p.Left
	return p
}

// A lost answer to either write of a commit, retried, counts the task
// once: its counter holds the set of partitions it counted.
func TestCommitCountedOnceAcrossLostAnswers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	_, store, inj := hookedStores(e)
	// The commit's write of its task: its UpdateItem, or the batched
	// UPDATE (dynamo/commitbatch.go) that goes first.
	taskWrite := func(op string, in any) bool {
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			pk, _ := in.Key["pk"].(*types.AttributeValueMemberS)
			return op == "UpdateItem" && pk != nil && strings.HasPrefix(pk.Value, "TASK#")
		case *dynamodb.BatchExecuteStatementInput:
			for _, st := range in.Statements {
				if strings.HasPrefix(aws.ToString(st.Statement), "UPDATE ") {
					return true
				}
			}
		}
		return false
	}
	for i, tc := range []struct {
		name  string
		match func(string, any) bool
	}{
		{"the task's write", taskWrite},
		{"the count", countWrite},
	} {
		t.Run(tc.name, func(t *testing.T) {
			job := fmt.Sprintf("jcountlost%06d", i)
			const n = 4
			putReadyStage(t, e.r.Store, job, n, 1, n, time.Now().Add(time.Hour))
			now, lost := time.Now(), inj.Total()
			claimReady(t, e.r.Store, job, n, sameToken, now)
			for p := range n {
				ref := domain.TaskRef{Job: job, Partition: p}
				if p == 1 {
					inj.Once(faults.Rule{Service: "DynamoDB", Kind: faults.Lost, Match: tc.match})
				}
				p := dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: "tok", Now: now}, Attempt: 1, Shards: 1, RecordsIn: 10}
				done, err := store.TaskCommit(ctx, p)
				if err != nil {
					t.Fatal(err)
				}
				// An application-level repeat of the same commit, as an
				// executor that lost the answer altogether sends it.
				again, err := store.TaskCommit(ctx, p)
				if err != nil {
					t.Fatalf("repeated commit: %v", err)
				}
				if want := p.Ref.Partition == n-1; done != want || again != want {
					t.Fatalf("commit of %d: shard done %v, repeat %v, want %v", p.Ref.Partition, done, again, want)
				}
			}
			if inj.Total() == lost {
				t.Fatal("no answer was lost")
			}
			prog := progressOf(t, e, job, n, 1)
			if prog.Committed != n || prog.Left != 0 {
				t.Fatalf("progress %+v, want %d committed once each", prog, n)
			}
			if in := recordsIn(t, e, job); in != 10*n {
				t.Fatalf("the counter holds %d records in, want %d", in, 10*n)
			}
		})
	}
}

func recordsIn(t *testing.T, e *env, job string) int64 {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "CNT#" + job + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "CNT"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if v, ok := out.Item["rin"].(*types.AttributeValueMemberN); ok {
		fmt.Sscan(v.Value, &n)
	}
	return n
}

// A committer that dies between its commit and its count leaves the task
// committed and uncounted: the sweep counts it, and the stage completes
// (after the chunk's marker's last look, or the task's own index entry
// falls due), exactly once.
func TestSweepCountsACommitItsCommitterDidNot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		tasks int
		// byClaim: the task's message comes back (its committer died
		// before deleting it too), and the refused claim counts it.
		byClaim bool
		// indexed: the task went into the index on its own after its
		// claim (a marker's look found its lease lapsed), so its entry
		// is what brings the sweep to it.
		indexed bool
	}{
		{"a chunk's task, watched by its ready marker", 3, false, false},
		{"a task indexed on its own after its claim", 3, false, true},
		{"a task whose message comes back", 3, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newSweepRig(t, testTimings)
			ctx := context.Background()
			_, hooked, inj := hookedStores(rig.e)
			dying := rig.service(hooked, rig.e.r.Queue)
			inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.ServerError, Rate: 1, Match: countWrite})
			id := submitTo(t, rig.svc, "uncounted", oneStage("uncounted", "work", tc.tasks))
			for p := range tc.tasks {
				c, err := rig.svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: p})
				if err != nil {
					t.Fatal(err)
				}
				svc := rig.svc
				if p == 0 {
					svc = dying
					if tc.indexed {
						if err := rig.e.r.Store.DueSet(ctx, dynamo.DueItem{Kind: dynamo.DueTask, Job: id, Task: c.Task.Ref}, rig.clk.Now().Add(time.Hour)); err != nil {
							t.Fatal(err)
						}
					}
				}
				err = svc.Commit(ctx, c, control.CommitResult{Outputs: 0})
				if p == 0 && err == nil {
					t.Fatal("the commit whose count failed succeeded")
				}
				if p != 0 && err != nil {
					t.Fatal(err)
				}
			}
			if task := getTask(t, rig, domain.TaskRef{Job: id, Partition: 0}); task.State != sm.TaskSucceeded {
				t.Fatalf("the task whose count failed is %s, want SUCCEEDED", task.State)
			}
			mustSweep(t, rig.svc)
			if st := sm.JobState(jobState(t, rig.svc, id).State); st != sm.JobRunning {
				t.Fatalf("job %s with an uncounted task before the sweep's look, want RUNNING", st)
			}
			if tc.byClaim {
				_, err := rig.svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: 0})
				if !errors.Is(err, domain.ErrAlreadyDone) {
					t.Fatalf("claim of the committed task: %v, want ErrAlreadyDone", err)
				}
			} else {
				rig.clk.Advance(max(testTimings.StuckAfter, dynamo.CountGrace) + time.Second)
				if c := mustSweep(t, rig.svc); c.Counted != 1 {
					t.Fatalf("the sweep counted %d tasks, want 1: %+v", c.Counted, c)
				}
			}
			if st := sm.JobState(jobState(t, rig.svc, id).State); st != sm.JobSucceeded {
				t.Fatalf("job %s after the sweep counted its last task, want SUCCEEDED", st)
			}
			shards := dynamo.ShardCount(tc.tasks)
			if prog := progressOf(t, rig.e, id, tc.tasks, shards); prog.Committed != tc.tasks {
				t.Fatalf("progress %+v, want %d committed", prog, tc.tasks)
			}
			rig.clk.Advance(time.Hour)
			if c := mustSweep(t, rig.svc); c.Counted != 0 {
				t.Fatalf("a later sweep counted %d tasks again: %+v", c.Counted, c)
			}
		})
	}
}

// An executor process batches its commits' counts (Config.CountLinger, as
// deployed executors do): neighbouring partitions share a counter shard,
// and their counts go in one write. A job's counts stay exact under lost
// answers, and its stages complete through the batches' follow-up.
func TestBatchedCountsAreExact(t *testing.T) {
	t.Parallel()
	const n = 200
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	inj := faults.New(1)
	cc := control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second, CountLinger: tuning.CountLinger}
	var mu sync.Mutex
	writes := 0
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Throttle, Match: func(op string, in any) bool {
		if countWrite(op, in) {
			mu.Lock()
			writes++
			mu.Unlock()
		}
		return false
	}})
	// Lost answers: the write applies, its retry finds the partitions
	// counted and counts each on its own, idempotently.
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Count: 3, Match: countWrite})
	e := newEnv(t, reg, envOptions{faults: inj, control: &cc, slots: 16})
	id := e.submit("batched", []byte(oneStage("batched", "work", n)))
	st := e.waitJob(id, time.Minute)
	if st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s: %+v", st.State, st)
	}
	assertCommittedOnce(t, e, id, 0, n, 1)
	mu.Lock()
	defer mu.Unlock()
	if writes > n/2 {
		t.Fatalf("%d count writes for %d tasks, want them batched (at most %d)", writes, n, n/2)
	}
	t.Logf("%d count writes for %d tasks", writes, n)
}

// A process that dies with counts waiting for their batch leaves those
// tasks committed and uncounted: the sweep counts them, and the stage
// completes.
func TestCountsLostWithTheirProcessAreCountedBySweep(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	cfg := rig.cfg
	cfg.CountLinger = time.Hour // never flushed: the process dies first
	dying := newService(rig.e, cfg, rig.e.r.Store, rig.e.r.Queue, rig.clk, rig.logs.logger())
	id := submitTo(t, rig.svc, "pending", oneStage("pending", "work", 3))
	for p := range 3 {
		c, err := dying.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		if err := dying.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatal(err)
		}
	}
	if prog := progressOf(t, rig.e, id, 3, 1); prog.Committed != 0 {
		t.Fatalf("progress %+v before any flush, want nothing counted", prog)
	}
	rig.clk.Advance(testTimings.StuckAfter + time.Second)
	if c := mustSweep(t, rig.svc); c.Counted != 3 {
		t.Fatalf("the sweep counted %d tasks, want 3: %+v", c.Counted, c)
	}
	if st := sm.JobState(jobState(t, rig.svc, id).State); st != sm.JobSucceeded {
		t.Fatalf("job %s, want SUCCEEDED", st)
	}
	// The dead process's batch, written late after all (a paused process
	// resumed), counts nothing twice.
	if err := dying.FlushCounts(ctx); err != nil {
		t.Fatal(err)
	}
	if prog := progressOf(t, rig.e, id, 3, 1); prog.Committed != 3 || prog.Left != 0 {
		t.Fatalf("progress %+v after the late batch, want 3 counted once", prog)
	}
}

// A commit that counted in its transaction (a watched task; or any commit
// of a release before split commits, whose counters keep no set) is
// never counted again by the recovery of uncounted commits: its task
// keeps no due time. Counting it again would take its stage's counters
// to zero with tasks still running.
func TestRecoveryNeverRecountsATransactionalCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := e.r.Store
	const job, n = "jtxcommit0000001", 3
	now := time.Now()
	putReadyStage(t, store, job, n+1, 1, n, now) // one more task, still running
	// The stage's record, which the look reads for its counter count.
	if _, err := dynamodb.NewFromConfig(e.cfg).PutItem(ctx, &dynamodb.PutItemInput{TableName: &e.r.Resources.Table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "JOB#" + job}, "sk": &types.AttributeValueMemberS{Value: "STAGE#00"},
		"st":  &types.AttributeValueMemberS{Value: string(sm.StageRunning)},
		"tot": &types.AttributeValueMemberN{Value: fmt.Sprint(n + 1)}, "nsh": &types.AttributeValueMemberN{Value: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	if st, err := store.StageGet(ctx, job, 0); err != nil || st.Shards != 1 {
		t.Fatalf("stage %+v, %v", st, err)
	}
	claimReady(t, store, job, n, sameToken, now)
	for p := range n {
		ref := domain.TaskRef{Job: job, Partition: p}
		if _, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: "tok", Now: now}, Attempt: 1, Shards: 1, Watched: true}); err != nil {
			t.Fatal(err)
		}
	}
	// As an earlier release's counter: counted, without the set.
	if _, err := dynamodb.NewFromConfig(e.cfg).UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &e.r.Resources.Table, UpdateExpression: aws.String("REMOVE done"),
		Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "CNT#" + job + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "CNT"}},
	}); err != nil {
		t.Fatal(err)
	}
	if due := dueTasks(t, store, job, now.Add(time.Hour)); len(due) != 0 {
		t.Fatalf("the chunk's last look put committed tasks %v in the index to be counted again", due)
	}
	for p := range n {
		counted, _, err := store.ShardEnsureCounted(ctx, domain.TaskRef{Job: job, Partition: p}, 1)
		if err != nil || counted {
			t.Fatalf("EnsureCounted of task %d: counted %v, err %v; want nothing counted", p, counted, err)
		}
	}
	if left, err := store.ShardLeft(ctx, job, 0, 0); err != nil || left != 1 {
		t.Fatalf("counter left %d (%v), want 1: the running task", left, err)
	}
}

// A count refused by a transaction on its counter (TransactionConflict,
// which the SDK does not retry) is tried again, not lost.
func TestCountRetriedAfterTransactionConflict(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	_, store, inj := hookedStores(e)
	const job, n = "jcountconflict01", 2
	putReadyStage(t, e.r.Store, job, n, 1, n, time.Now().Add(time.Hour))
	now := time.Now()
	claimReady(t, e.r.Store, job, n, sameToken, now)
	inj.Add(faults.Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Conflict, Count: 2, Match: countWrite})
	for p := range n {
		ref := domain.TaskRef{Job: job, Partition: p}
		if _, err := store.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: ref, Token: "tok", Now: now}, Attempt: 1, Shards: 1}); err != nil {
			t.Fatalf("commit of %d: %v", p, err)
		}
	}
	if inj.Total() != 2 {
		t.Fatalf("%d conflicts injected, want 2", inj.Total())
	}
	if prog := progressOf(t, e, job, n, 1); prog.Committed != n {
		t.Fatalf("progress %+v, want %d counted", prog, n)
	}
}

// A committer that counted its stage's last task and died before the
// stage's follow-up (the emptied shard's note, the completion) leaves a
// stage whose counters are all zero: the task's message comes back, and
// the refused claim, finding the task counted and its shard empty,
// finishes the follow-up instead of leaving it to the stage's next
// sweep check.
func TestRedeliveryFinishesTheFollowUpOfADeadLastCommitter(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	_, hooked, inj := hookedStores(rig.e)
	dying := rig.service(hooked, rig.e.r.Queue)
	// Everything the dying process writes or reads after its count fails.
	var mu sync.Mutex
	counted := false
	inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.ServerError, Rate: 1, Match: func(op string, in any) bool {
		mu.Lock()
		defer mu.Unlock()
		if countWrite(op, in) {
			counted = true
			return false
		}
		return counted
	}})
	const n = 3
	id := submitTo(t, rig.svc, "followup", oneStage("followup", "work", n))
	for p := range n {
		c, err := rig.svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: p})
		if err != nil {
			t.Fatal(err)
		}
		svc := rig.svc
		if p == n-1 {
			svc = dying
		}
		if err := svc.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil && p != n-1 {
			t.Fatal(err)
		}
	}
	if prog := progressOf(t, rig.e, id, n, dynamo.ShardCount(n)); prog.Committed != n || prog.Left != 0 {
		t.Fatalf("progress %+v, want all %d counted", prog, n)
	}
	if st := sm.JobState(jobState(t, rig.svc, id).State); st != sm.JobRunning {
		t.Fatalf("job %s before the redelivery, want RUNNING (the follow-up died)", st)
	}
	_, err := rig.svc.Claim(control.WithExecutor(ctx, control.NewExecutorID()), domain.TaskRef{Job: id, Partition: n - 1})
	if !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of the committed task: %v, want ErrAlreadyDone", err)
	}
	if st := sm.JobState(jobState(t, rig.svc, id).State); st != sm.JobSucceeded {
		t.Fatalf("job %s after the redelivery, want SUCCEEDED", st)
	}
	if prog := progressOf(t, rig.e, id, n, dynamo.ShardCount(n)); prog.Committed != n {
		t.Fatalf("progress %+v, want %d counted once", prog, n)
	}
}
