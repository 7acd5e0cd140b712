package integration

import (
	"context"
	"errors"
	"fmt"
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
	sm "github.com/batchwork/batchwork/statemachine"
)

// taskItems counts the task records of job's stage 0 in its first bucket.
func taskItems(t *testing.T, e *env, job string) int {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).Query(context.Background(), &dynamodb.QueryInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "TASK#" + job + "#0#0"},
		},
		Select: types.SelectCount,
	})
	if err != nil {
		t.Fatal(err)
	}
	return int(out.Count)
}

// A chunk of tasks that carry nothing but their position is materialized
// without task records (sm.TaskUnwritten): its first claim writes each,
// and the claim of a written task is refused as before. Proven on the
// emulator's conditional writes: of many claims racing on one unwritten
// task exactly one wins; a claim whose answer was lost recognises its own
// write on the SDK's retry; and a claim that carries no definition (a
// stage whose tasks are always written) writes nothing.
func TestUnwrittenTasksAreWrittenByTheirFirstClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	clean, store, inj := hookedStores(e)
	const job, n = "junwritten000001", 40
	now := time.Now()
	if err := clean.TaskPutMany(ctx, readyTasks(job, n), now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := taskItems(t, e, job); got != 0 {
		t.Fatalf("%d task records after materialization, want none", got)
	}
	claim := func(s *dynamo.Store, p int, tok string, mx int) (domain.Task, error) {
		return s.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: p}, Token: tok, Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: mx})
	}

	// No definition, no write.
	if _, err := claim(clean, 0, "nodef", 0); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("claim without a definition: %v, want ErrNotFound", err)
	}
	if got := taskItems(t, e, job); got != 0 {
		t.Fatalf("%d task records after a claim without a definition, want none", got)
	}

	// Racing first claims: one wins, the others find it held.
	const racers = 8
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for i := range racers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = claim(clean, 1, fmt.Sprintf("racer%d", i), 3)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		var held *domain.ClaimHeldError
		switch {
		case err == nil:
			won++
		case !errors.As(err, &held):
			t.Fatalf("a racing claim: %v, want a win or ClaimHeldError", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d of %d racing first claims won, want exactly 1", won, racers)
	}
	got, err := clean.TaskGet(ctx, domain.TaskRef{Job: job, Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got.State != sm.TaskClaimed || got.Attempt != 1 || got.MaxAttempts != 3 {
		t.Fatalf("task 1 after its first claim: %s attempt %d of %d, want CLAIMED attempt 1 of 3", got.State, got.Attempt, got.MaxAttempts)
	}

	// A lost answer: the SDK's retry finds the write, and it is ours;
	// whether the write was the batched insert (dynamo/firstclaim.go) or
	// the UpdateItem a claim makes once its batch failed.
	var mine domain.Task
	for _, tc := range []struct {
		name  string
		part  int
		rules []faults.Rule
	}{
		{"the insert's answer lost", 2, []faults.Rule{{Service: "DynamoDB", Operation: "BatchExecuteStatement", Kind: faults.Lost, Count: 1}}},
		{"the batch failed, the update's answer lost", 3, []faults.Rule{
			{Service: "DynamoDB", Operation: "BatchExecuteStatement", Kind: faults.ServerError, Count: 3}, // the SDK's three tries
			{Service: "DynamoDB", Operation: "UpdateItem", Kind: faults.Lost, Count: 1},
		}},
	} {
		before := inj.Total()
		want := 0
		for _, r := range tc.rules {
			inj.Add(r)
			want += r.Count
		}
		tok := fmt.Sprintf("lostanswer%d", tc.part)
		got, err := claim(store, tc.part, tok, 3)
		if err != nil || got.Token != tok || got.Attempt != 1 {
			t.Fatalf("%s: claim %+v, %v; want its own claim at attempt 1", tc.name, got, err)
		}
		if n := inj.Total() - before; n != want {
			t.Fatalf("%s: %d faults fired, want %d", tc.name, n, want)
		}
		if tc.part == 2 {
			mine = got
		}
	}

	// A written task keeps the rules: its commit fences, and a stale
	// message's claim of the committed task is refused.
	if _, err := clean.TaskCommit(ctx, dynamo.CommitParams{HolderParams: dynamo.HolderParams{Ref: mine.Ref, Token: mine.Token, Now: now}, Attempt: 1, Shards: 1, DeferCount: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := claim(clean, 2, "late", 3); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of a committed task: %v, want ErrAlreadyDone", err)
	}
	if got := taskItems(t, e, job); got != 3 {
		t.Fatalf("%d task records, want the 3 claimed", got)
	}
}

// Materializing a stage partitioned by count writes its chunks' markers
// and nothing else: 250 tasks, one PutItem (no transaction bounds it).
func TestCountStageMaterializesMarkersOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	db := newCountingDB(e)
	store := dynamo.New(db, e.r.Resources.Table)
	const job = "junwrittenmat001"
	if err := store.TaskPutMany(ctx, readyTasks(job, 250), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if tx, puts, batches := db.count("TransactWriteItems"), db.count("PutItem"), db.count("BatchExecuteStatement"); tx != 0 || puts != 1 || batches != 0 {
		t.Fatalf("250 tasks: %d transactions, %d puts and %d batches, want 0, 1 (the marker) and 0", tx, puts, batches)
	}
	if got := len(markedPartitions(t, e, job, 0)); got != 250 {
		t.Fatalf("the markers cover %d partitions, want 250", got)
	}
}

// The sweep's look at a chunk of unwritten tasks: when they must be
// resent (the chunk's send was never confirmed), it writes each READY in
// the index with the marker's definition, leaving a task claimed since
// alone; after that the sweep handles them as written tasks.
func TestReadyMarkerWritesTheUnwrittenTasksItHandsToTheSweep(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	const job, n, claimed = "junwrittenlook01", 30, 4
	now := time.Now()
	if err := store.TaskPutMany(ctx, readyTasks(job, n), now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	claimReady(t, store, job, claimed, func(int) string { return "t" }, now)
	got := dueTasks(t, store, job, now)
	if want := span(claimed, n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("due tasks from the marker: %v, want the unclaimed %v", got, want)
	}
	for p := range n {
		tk, err := store.TaskGet(ctx, domain.TaskRef{Job: job, Partition: p})
		if err != nil {
			t.Fatalf("task %d after the look: %v", p, err)
		}
		want := sm.TaskReady
		if p < claimed {
			want = sm.TaskClaimed
		}
		if tk.State != want || tk.MaxAttempts != 3 || (p >= claimed && (!tk.Watched || tk.Attempt != 0)) {
			t.Fatalf("task %d after the look: %s attempt %d of %d watched %v, want %s of 3 (in the index when waiting)", p, tk.State, tk.Attempt, tk.MaxAttempts, tk.Watched, want)
		}
	}
	// A written waiting task is claimed as any READY task.
	if _, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: job, Partition: n - 1}, Token: "u", Now: now, Lease: time.Minute, Grace: time.Minute, MaxAttempts: 3}); err != nil {
		t.Fatalf("claim of a task the look wrote: %v", err)
	}
}

// Through the control plane: a job's tasks stay unwritten until claimed;
// the task list shows them READY (and filters by state with them); a
// cancel ends them through the sweep's look at their markers, which
// writes each CANCELLED; and a claim of a partition the stage does not
// have writes nothing.
func TestUnwrittenTasksThroughTheControlPlane(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	const n = 150
	id := submitTo(t, rig.svc, "unwritten", fmt.Sprintf(`{"name":"unwritten","stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, n))
	if got := taskItems(t, rig.e, id); got != 0 {
		t.Fatalf("%d task records after submit, want none", got)
	}
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	for _, p := range []int{0, 7} {
		if _, err := rig.svc.Claim(ctx, ref(p)); err != nil {
			t.Fatalf("claim task %d: %v", p, err)
		}
	}
	if _, err := rig.svc.Claim(ctx, ref(n)); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of partition %d of a %d-task stage: %v, want ErrAlreadyDone", n, n, err)
	}
	if _, err := rig.e.r.Store.TaskGet(ctx, ref(n)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("task %d after its refused claim: %v, want no record", n, err)
	}

	list := func(state string, limit int, cursor string) control.TaskList {
		t.Helper()
		l, err := rig.svc.ListTasks(ctx, control.ListTasksRequest{Owner: "tester", ID: id, State: state, Limit: limit, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cases := []struct {
		state string
		limit int
		want  int
	}{
		{"", 200, n},
		{"READY", 200, n - 2},
		{"CLAIMED", 200, 2},
		{"", 40, n},
		{"READY", 40, n - 2},
	}
	for _, c := range cases {
		seen, cursor := map[int]string{}, ""
		for pages := 0; ; pages++ {
			if pages > n {
				t.Fatalf("state %q limit %d: no end to the pages", c.state, c.limit)
			}
			l := list(c.state, c.limit, cursor)
			if len(l.Tasks) > c.limit {
				t.Fatalf("state %q limit %d: a page of %d", c.state, c.limit, len(l.Tasks))
			}
			for _, ti := range l.Tasks {
				if _, dup := seen[ti.Partition]; dup {
					t.Fatalf("state %q limit %d: task %d listed twice", c.state, c.limit, ti.Partition)
				}
				seen[ti.Partition] = ti.State
			}
			if cursor = l.NextCursor; cursor == "" {
				break
			}
		}
		if len(seen) != c.want {
			t.Fatalf("state %q limit %d: %d tasks listed, want %d", c.state, c.limit, len(seen), c.want)
		}
		for p, st := range seen {
			want := "READY"
			if p == 0 || p == 7 {
				want = "CLAIMED"
			}
			if st != want {
				t.Fatalf("state %q: task %d listed %s, want %s", c.state, p, st, want)
			}
		}
	}

	if _, err := rig.svc.Cancel(ctx, "tester", id); err != nil {
		t.Fatal(err)
	}
	rig.clk.Advance(rig.cfg.StuckAfter + time.Second)
	for range 3 { // the look writes them into the index; the sweep cancels them
		mustSweep(t, rig.svc)
		rig.clk.Advance(dynamo.ExpandedRecheck + time.Second)
	}
	for _, tk := range stageTasks(t, rig.e, id, 0) {
		if tk.Unwritten || (tk.State != sm.TaskCancelled && tk.State != sm.TaskClaimed) {
			t.Fatalf("task %d after the cancel and sweeps: %s (unwritten %v), want CANCELLED", tk.Ref.Partition, tk.State, tk.Unwritten)
		}
	}
}

// A first claim that writes its task is the only writer that knows of the
// record, so a job deleted around it must not keep it: deleted after the
// claim's check of the job and before its write (the deletion's pass over
// the job's tasks found none), the claim's check after the write finds
// the job gone and deletes the record. A process that knows the job is
// gone, or ended, writes nothing.
func TestFirstClaimOfADeletedJobLeavesNoRecord(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	clean, store, inj := hookedStores(rig.e)
	cfg := rig.cfg
	cfg.JobStateTTL = -1 // read the job's state at each check, as after the TTL
	claimer := newService(rig.e, cfg, store, rig.e.r.Queue, rig.clk, rig.logs.logger())
	id := submitTo(t, rig.svc, "deleted", `{"name":"deleted","stages":[{"name":"s","task":"work","partitions":{"count":4}}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	if _, err := claimer.Claim(ctx, ref(0)); err != nil { // the claimer caches the job's spec
		t.Fatal(err)
	}
	var deleted bool
	var delErr error
	// The claim's write of task 1: its batched insert (dynamo/firstclaim.go)
	// or, were that to fail, its UpdateItem.
	writesTask1 := func(in any) bool {
		switch in := in.(type) {
		case *dynamodb.UpdateItemInput:
			sk, _ := in.Key["sk"].(*types.AttributeValueMemberS)
			return sk != nil && sk.Value == "000001"
		case *dynamodb.BatchExecuteStatementInput:
			for _, st := range in.Statements {
				for _, v := range st.Parameters {
					if sk, _ := v.(*types.AttributeValueMemberS); sk != nil && sk.Value == "000001" {
						return true
					}
				}
			}
		}
		return false
	}
	inj.Add(faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Match: func(_ string, in any) bool {
		if !writesTask1(in) || deleted {
			return false
		}
		deleted = true
		if _, delErr = rig.svc.Cancel(ctx, "tester", id); delErr == nil {
			for done := false; !done && delErr == nil; {
				var d control.JobDeletion
				d, delErr = rig.svc.DeleteJob(ctx, "tester", id)
				done = d.Complete
			}
		}
		return false // a hook, never a fault
	}})
	_, err := claimer.Claim(ctx, ref(1))
	if !deleted || delErr != nil {
		t.Fatalf("the job was not deleted during the claim: %v %v", deleted, delErr)
	}
	if !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of a task of a job deleted during it: %v, want ErrAlreadyDone", err)
	}
	if _, err := clean.TaskGet(ctx, ref(1)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("task 1 of the deleted job: %v, want no record", err)
	}
	// Known gone: no write at all.
	before := inj.Total()
	if _, err := claimer.Claim(ctx, ref(2)); !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of a task of a deleted job: %v, want ErrAlreadyDone", err)
	}
	if _, err := clean.TaskGet(ctx, ref(2)); !errors.Is(err, domain.ErrNotFound) || inj.Total() != before {
		t.Fatalf("task 2 of the deleted job: %v, want no record", err)
	}
}

// A stage's completion reads its counters once, not once per emptied
// shard: each count that empties a shard adds the shard to the stage's
// set of emptied shards, and only the one that fills the set reads every
// counter to complete the stage. (Before, each emptied shard read all of
// them: shards² reads a stage, 1.6 read units per task at 10,000 tasks,
// which a fast materialization exposed: an unmaterialized stage skips the
// read.)
func TestStageCompletionReadsTheCountersOnce(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	db := newCountingDB(rig.e)
	store := dynamo.New(db, rig.e.r.Resources.Table)
	svc := newService(rig.e, rig.cfg, store, rig.e.r.Queue, rig.clk, rig.logs.logger())
	const n = 640 // ten counter shards of 64
	id := submitTo(t, svc, "reads", fmt.Sprintf(`{"name":"reads","stages":[{"name":"s","task":"work","partitions":{"count":%d}}]}`, n))
	st, err := rig.e.r.Store.StageGet(ctx, id, 0)
	if err != nil || st.Shards != 10 || !st.Materialized {
		t.Fatalf("stage %+v, %v: want 10 shards, materialized", st, err)
	}
	before := db.count("BatchGetItem")
	for p := range n {
		c, err := svc.Claim(ctx, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		if err != nil {
			t.Fatalf("claim %d: %v", p, err)
		}
		if err := svc.Commit(ctx, c, control.CommitResult{Outputs: 0}); err != nil {
			t.Fatalf("commit %d: %v", p, err)
		}
	}
	reads := db.count("BatchGetItem") - before
	if got := jobState(t, rig.svc, id).State; got != string(sm.JobSucceeded) { // read through the uncounted store
		t.Fatalf("job %s after every commit, want SUCCEEDED", got)
	}
	if reads > 2 {
		t.Fatalf("the stage's completion took %d batch reads of its counters, want 1 (2 at most)", reads)
	}
}

// A process that still holds its cached FAILED state of a job its owner
// has redriven meanwhile must not touch the redriven tasks when an old
// message of one comes in: the claim is refused as not due (the redrive's
// wait is there for exactly this), and nothing is cancelled. (A check of
// the cached state before the claim cancelled the task, which the
// redriven job then never finished.)
func TestStaleFailedStateLeavesRedrivenTasksAlone(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	cfg := rig.cfg
	cfg.JobStateTTL = time.Hour // its FAILED stays cached through the redrive
	stale := newService(rig.e, cfg, rig.e.r.Store, rig.e.r.Queue, rig.clk, rig.logs.logger())
	id := submitTo(t, rig.svc, "stale", `{"name":"stale","stages":[{"name":"s","task":"work","partitions":{"count":2},"retry":{"maxAttempts":1}}]}`)
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }
	c := mustClaim(t, rig.svc, ref(0))
	if _, err := rig.svc.Fail(ctx, c, control.FailParams{Cause: "boom"}); err != nil {
		t.Fatal(err)
	}
	if got := jobState(t, rig.svc, id).State; got != string(sm.JobFailed) {
		t.Fatalf("job %s after its task failed, want FAILED", got)
	}
	// The stale process learns FAILED from a message of the other task.
	if _, err := stale.Claim(ctx, ref(1)); !errors.Is(err, domain.ErrJobNotRunning) && !errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("claim of a FAILED job's task: %v, want refused", err)
	}
	if _, err := rig.svc.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id}); err != nil {
		t.Fatal(err)
	}
	// An old message of the redriven task reaches the stale process.
	_, err := stale.Claim(ctx, ref(0))
	var notDue *domain.NotDueError
	if !errors.As(err, &notDue) {
		t.Fatalf("stale claim of a redriven task: %v, want NotDueError", err)
	}
	for _, tk := range stageTasks(t, rig.e, id, 0) {
		if tk.State != sm.TaskReady {
			t.Fatalf("task %d after the stale claim: %s, want READY (redriven)", tk.Ref.Partition, tk.State)
		}
	}
}
