package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// tolerantRegistry: "tmap" fails (every attempt) on the partitions whose
// params say "fail": "yes", and otherwise writes its partition number to
// shuffle part partition%2; "tcopy" copies its input to its output.
func tolerantRegistry() *batchwork.Registry {
	reg := batchwork.NewRegistry()
	reg.Register("tmap", func(ctx context.Context, t *batchwork.Task) error {
		switch t.Params["fail"] {
		case "yes":
			return fmt.Errorf("bad data in partition %d", t.Partition)
		case "permanent":
			return batchwork.Permanent(fmt.Errorf("bad data in partition %d", t.Partition))
		}
		_, err := fmt.Fprintf(t.Out.Part(t.Partition%t.Out.Parts()), "from %d\n", t.Partition)
		return err
	})
	reg.Register("tcopy", func(ctx context.Context, t *batchwork.Task) error {
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			if _, err := fmt.Fprintln(t.Out, sc.Text()); err != nil {
				return err
			}
		}
		return sc.Err()
	})
	return reg
}

// A stage with toleratedFailures goes on without the tasks that failed
// for good while their number is within its allowance: the job succeeds,
// its status counts the failed partitions, its manifest lists them with
// their errors, and the shuffle downstream reads only the committed map
// tasks' outputs. One failure past the allowance fails the job, with an
// error that counts them.
func TestToleratedFailures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, tolerantRegistry(), envOptions{})
	ctx := context.Background()
	for _, tc := range []struct {
		name, fail, tolerance string
		permanent             int // a partition that fails with a permanent error, or -1
		wantState             sm.JobState
		wantFailed            []int
		wantErr               string
	}{
		{name: "within count", fail: "1,4", permanent: 4, tolerance: `{"count":2}`, wantState: sm.JobSucceeded, wantFailed: []int{1, 4}},
		{name: "within percent", fail: "3", permanent: -1, tolerance: `{"percent":20}`, wantState: sm.JobSucceeded, wantFailed: []int{3}},
		{name: "past count", fail: "0,2,5", permanent: -1, tolerance: `{"count":2}`, wantState: sm.JobFailed, wantErr: `stage "map": 3 tasks failed, 2 tolerated`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			params := make([]string, 6)
			for p := range params {
				fail := "no"
				if slices.Contains(strings.Split(tc.fail, ","), fmt.Sprint(p)) {
					fail = "yes"
				}
				if p == tc.permanent {
					fail = "permanent"
				}
				params[p] = fmt.Sprintf(`{"fail":%q}`, fail)
			}
			id := e.submit("tol-"+tc.name, []byte(fmt.Sprintf(`{"name":"tol","stages":[
				{"name":"map","task":"tmap","partitions":{"count":6,"params":[%s]},"retry":{"maxAttempts":2,"backoff":"50ms"},
				 "toleratedFailures":%s,"shuffle":{"partitions":2}},
				{"name":"reduce","task":"tcopy","after":["map"]}]}`, strings.Join(params, ","), tc.tolerance)))
			st := e.waitJob(id, time.Minute)
			if st.State != string(tc.wantState) {
				t.Fatalf("job %s (%s), want %s", st.State, st.Error, tc.wantState)
			}
			if tc.wantErr != "" {
				if !strings.Contains(st.Error, tc.wantErr) {
					t.Fatalf("job error %q, want it to contain %q", st.Error, tc.wantErr)
				}
				return
			}
			if st.FailedPartitions != len(tc.wantFailed) || st.Stages[0].FailedTasks != len(tc.wantFailed) || st.Stages[0].Committed != 6-len(tc.wantFailed) {
				t.Fatalf("status: %d failed partitions, stage map %d failed and %d committed; want %d failed", st.FailedPartitions,
					st.Stages[0].FailedTasks, st.Stages[0].Committed, len(tc.wantFailed))
			}
			m, err := blob.ReadManifest(ctx, e.r.Blob, blob.JobManifestKey(id))
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, f := range m.Failed {
				attempts, class := 2, "error"
				if f.Partition == tc.permanent {
					attempts, class = 1, "permanent" // failed at once
				}
				if f.Stage != "map" || f.Attempts != attempts || f.Class != class || !strings.Contains(f.Error, fmt.Sprintf("bad data in partition %d", f.Partition)) {
					t.Errorf("manifest lists failed partition %+v", f)
				}
				got = append(got, f.Partition)
			}
			sort.Ints(got)
			if !slices.Equal(got, tc.wantFailed) || m.FailedTotal != len(tc.wantFailed) {
				t.Fatalf("manifest lists failed partitions %v (total %d), want %v", got, m.FailedTotal, tc.wantFailed)
			}
			// The history says which failures were tolerated.
			h, err := e.r.Service.History(ctx, control.HistoryRequest{Owner: "tester", ID: id, Limit: 200})
			if err != nil {
				t.Fatal(err)
			}
			tolerated := 0
			for _, ev := range h.Events {
				if ev.Type == "task.tolerated" {
					tolerated++
				}
			}
			if tolerated != len(tc.wantFailed) {
				t.Fatalf("history has %d task.tolerated events, want %d: %+v", tolerated, len(tc.wantFailed), h.Events)
			}
			// The reducers read every committed map task's output and
			// nothing of the failed ones.
			var lines []string
			err = blob.EachManifestOutput(ctx, e.r.Blob, m, func(o domain.Output) error {
				raw, err := e.r.Blob.Get(ctx, o.Key)
				lines = append(lines, strings.Fields(strings.ReplaceAll(string(raw), "from ", "from_"))...)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(lines)
			var want []string
			for p := 0; p < 6; p++ {
				if !slices.Contains(tc.wantFailed, p) {
					want = append(want, fmt.Sprintf("from_%d", p))
				}
			}
			if !slices.Equal(lines, want) {
				t.Fatalf("job outputs %v, want %v", lines, want)
			}
		})
	}
}

// Concurrent failures never pass a stage's allowance: of n tasks failing
// for good at once, exactly allowed are tolerated, each counted once on
// its shard and its stage, whatever the transactions meet (conflicts,
// throttles, lost responses); the others are refused and left unchanged.
func TestToleratedFailuresRaceNeverPassAllowance(t *testing.T) {
	t.Parallel()
	const n, allowed = 12, 5
	inj := faults.New(11)
	inj.SetEnabled(false)
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, faults: inj})
	ctx := context.Background()
	id := e.submit("race", []byte(fmt.Sprintf(`{"name":"race","stages":[{"name":"a","task":"work","partitions":{"count":%d},
		"retry":{"maxAttempts":1},"toleratedFailures":{"count":%d}}]}`, n, allowed)))
	store := e.r.Store
	st, err := store.StageGet(ctx, id, 0)
	if err != nil || st.Enqueued != n {
		t.Fatalf("stage %+v, %v; want %d tasks", st, err, n)
	}
	now := time.Now()
	tokens := make([]string, n)
	for p := range n {
		tokens[p] = fmt.Sprintf("tok%d", p)
		if _, err := store.TaskClaim(ctx, dynamo.ClaimParams{Ref: domain.TaskRef{Job: id, Stage: 0, Partition: p}, Token: tokens[p], Now: now, Lease: time.Minute, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	inj.Add(
		faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Conflict, Rate: 0.3},
		faults.Rule{Service: "DynamoDB", Kind: faults.Throttle, Rate: 0.2},
		faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Rate: 0.2},
	)
	inj.SetEnabled(true)
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for p := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := store.TaskFailTolerated(ctx, dynamo.TolerateParams{
				Ref: domain.TaskRef{Job: id, Stage: 0, Partition: p}, Event: sm.TaskFail, Token: tokens[p], Now: now,
				Err: "boom", Due: now, Shards: st.Shards, Allowed: allowed,
			})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				outcomes["tolerated"]++
			case errors.Is(err, dynamo.ErrNotTolerated):
				outcomes["refused"]++
			case errors.Is(err, domain.ErrStaleClaim):
				// A lost response whose retry found its own write applied.
				outcomes["applied, response lost"]++
			default:
				t.Errorf("partition %d: %v", p, err)
			}
		}()
	}
	wg.Wait()
	inj.SetEnabled(false)
	t.Logf("outcomes %v", outcomes)
	if inj.Total() == 0 {
		t.Fatal("no fault injected; the race ran clean")
	}
	// Whatever each caller heard, the records agree: allowed tasks FAILED
	// and tolerated, the rest still CLAIMED, counted once each.
	tasks := stageTasks(t, e, id, 0)
	tolerated, claimed := 0, 0
	for _, tk := range tasks {
		switch {
		case tk.State == sm.TaskFailed && tk.Tolerated:
			tolerated++
		case tk.State == sm.TaskClaimed:
			claimed++
		default:
			t.Errorf("task %s: %s (tolerated %v)", tk.Ref, tk.State, tk.Tolerated)
		}
	}
	st, err = store.StageGet(ctx, id, 0)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if tolerated != allowed || claimed != n-allowed || st.Tolerated != allowed || prog.Left != n-allowed {
		t.Fatalf("%d tasks tolerated, %d still claimed, stage counts %d, counters left %d; want %d, %d, %d, %d",
			tolerated, claimed, st.Tolerated, prog.Left, allowed, n-allowed, allowed, n-allowed)
	}
	if outcomes["refused"] < n-allowed-outcomes["applied, response lost"] {
		t.Fatalf("outcomes %v: fewer refusals than failures past the allowance", outcomes)
	}
}

// The tolerate condition DynamoDB evaluates agrees with the stage rules
// (sm.StageTolerate, sm.Tolerates) for every stage state and count.
func TestStoreToleranceConditionAgreesWithGuards(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	store := e.r.Store
	now := time.Now().UTC().Truncate(time.Millisecond)
	const job, tok = "jtolguards", "tokA"
	if err := store.ShardPut(ctx, job, 0, 1000, 1); err != nil {
		t.Fatal(err)
	}
	partition := 0
	for _, state := range sm.Stages.States {
		for _, c := range []struct{ failed, allowed int }{{-1, 2}, {0, 2}, {1, 2}, {2, 2}, {3, 2}, {0, 0}} {
			name := fmt.Sprintf("%s/%d of %d", state, c.failed, c.allowed)
			t.Run(name, func(t *testing.T) {
				stageItem := map[string]types.AttributeValue{
					"pk": &types.AttributeValueMemberS{Value: "JOB#" + job}, "sk": &types.AttributeValueMemberS{Value: "STAGE#00"},
					"st": &types.AttributeValueMemberS{Value: string(state)},
				}
				if c.failed >= 0 { // -1: the stage has tolerated none yet (no attribute)
					stageItem["tfl"] = &types.AttributeValueMemberN{Value: fmt.Sprint(c.failed)}
				}
				if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(e.r.Resources.Table), Item: stageItem}); err != nil {
					t.Fatal(err)
				}
				ref := domain.TaskRef{Job: job, Stage: 0, Partition: partition}
				partition++
				putTaskRecord(t, db, e.r.Resources.Table, ref, sm.TaskView{State: sm.TaskClaimed, Attempt: 1, MaxAttempts: 1, Token: tok, LeaseUntil: now.Add(time.Minute)})
				_, lookErr := sm.Stages.Lookup(state, sm.StageTolerate)
				allowed := lookErr == nil && sm.Tolerates(max(c.failed, 0), c.allowed)
				_, err := store.TaskFailTolerated(ctx, dynamo.TolerateParams{Ref: ref, Event: sm.TaskFail, Token: tok, Now: now, Err: "x", Shards: 1, Allowed: c.allowed})
				if err != nil && !errors.Is(err, dynamo.ErrNotTolerated) {
					t.Fatal(err)
				}
				if got := err == nil; got != allowed {
					t.Fatalf("DynamoDB tolerated=%v (err %v), statemachine allows=%v", got, err, allowed)
				}
			})
		}
	}
}
