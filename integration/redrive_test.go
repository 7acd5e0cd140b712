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
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// fixable is a map and a reduce whose failures a test switches on and off
// (the "fix"), counting every run that committed work.
type fixable struct {
	mapBroken, reduceBroken atomic.Bool
	mu                      sync.Mutex
	ok                      map[string]int // job/stage/partition -> successful runs
	runs                    map[string]int // stage -> runs of any outcome
}

func newFixable() (*fixable, *batchwork.Registry) {
	f := &fixable{ok: map[string]int{}, runs: map[string]int{}}
	reg := batchwork.NewRegistry()
	reg.Register("rmap", func(ctx context.Context, t *batchwork.Task) error {
		f.note(t, false)
		if f.mapBroken.Load() && (t.Partition == 2 || t.Partition == 4) {
			return fmt.Errorf("map broken on partition %d", t.Partition)
		}
		if _, err := fmt.Fprintf(t.Out.Part(t.Partition%t.Out.Parts()), "m%d\n", t.Partition); err != nil {
			return err
		}
		f.note(t, true)
		return nil
	})
	reg.Register("rreduce", func(ctx context.Context, t *batchwork.Task) error {
		f.note(t, false)
		if f.reduceBroken.Load() {
			return fmt.Errorf("reduce broken")
		}
		sc := bufio.NewScanner(t.Input)
		for sc.Scan() {
			if _, err := fmt.Fprintln(t.Out, sc.Text()); err != nil {
				return err
			}
		}
		if sc.Err() == nil {
			f.note(t, true)
		}
		return sc.Err()
	})
	return f, reg
}

func (f *fixable) note(t *batchwork.Task, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ok {
		f.ok[fmt.Sprintf("%s/%s/%d", t.Job, t.Stage, t.Partition)]++
	} else {
		f.runs[t.Stage]++
	}
}

func (f *fixable) stageRuns(stage string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[stage]
}

// committedOnce fails unless every task of the job's stage committed
// work in exactly one run, over the job's redrives.
func (f *fixable) committedOnce(t *testing.T, job, stage string, n int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range n {
		if c := f.ok[fmt.Sprintf("%s/%s/%d", job, stage, p)]; c != 1 {
			t.Errorf("%s/%s/%d ran to success %d times, want once", job, stage, p, c)
		}
	}
}

// redriveJobLines are the lines of a succeeded job's outputs, sorted.
func redriveJobLines(t *testing.T, e *env, job string) []string {
	t.Helper()
	ctx := context.Background()
	m, err := blob.ReadManifest(ctx, e.r.Blob, blob.JobManifestKey(job))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	err = blob.EachManifestOutput(ctx, e.r.Blob, m, func(o domain.Output) error {
		raw, err := e.r.Blob.Get(ctx, o.Key)
		lines = append(lines, strings.Fields(string(raw))...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return lines
}

const fixableSpec = `{"name":"fixable","stages":[
	{"name":"map","task":"rmap","partitions":{"count":6},"retry":{"maxAttempts":2,"backoff":"50ms"},"shuffle":{"partitions":2}},
	{"name":"reduce","task":"rreduce","after":["map"],"retry":{"maxAttempts":1}}]}`

var fixableLines = []string{"m0", "m1", "m2", "m3", "m4", "m5"}

// A failed job's failed tasks are listed with their errors; after a fix,
// a redrive runs only the tasks that did not finish, under the same job
// id, and the job succeeds with every partition's output. Committed tasks
// never run again; a repeated redrive request (the same count) does not
// redrive twice; a running, succeeded or cancelled job is refused. The
// history records the redrive.
func TestRedriveRetriesOnlyUnfinishedTasks(t *testing.T) {
	t.Parallel()
	f, reg := newFixable()
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error { <-ctx.Done(); return ctx.Err() })
	inj := faults.New(3)
	inj.SetEnabled(false)
	e := newEnv(t, reg, envOptions{faults: inj})
	ctx := context.Background()
	f.mapBroken.Store(true)
	id := e.submit("redrive", []byte(fixableSpec))
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s (%s), want FAILED", st.State, st.Error)
	}

	var out, errOut syncBuffer
	if c := e.cliRun(ctx, "tester", &out, &errOut, "failed", id); c != cli.ExitOK {
		t.Fatalf("failed: exit %d %s", c, errOut.String())
	}
	if !strings.Contains(out.String(), "map broken on partition") || !strings.Contains(out.String(), "retries exhausted") {
		t.Fatalf("batchwork failed does not show the failed tasks' errors:\n%s", out.String())
	}
	// Another owner sees nothing of it.
	var o2, e2 syncBuffer
	if c := e.cliRun(ctx, "mallory", &o2, &e2, "failed", id); c == cli.ExitOK {
		t.Fatalf("another owner listed the failed tasks:\n%s", o2.String())
	}

	f.mapBroken.Store(false) // the fix
	mapRunsBefore := f.stageRuns("map")
	// The redrive's own write applies but its answer is lost: the retry
	// must recognise it, not refuse it or redrive twice.
	inj.Once(faults.Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: faults.Lost, Match: func(_ string, in any) bool {
		tx, ok := in.(*dynamodb.TransactWriteItemsInput)
		return ok && len(tx.TransactItems) > 0 && tx.TransactItems[0].Update != nil &&
			strings.Contains(aws.ToString(tx.TransactItems[0].Update.UpdateExpression), "rdl = list_append")
	}})
	inj.SetEnabled(true)
	var rOut, rErr syncBuffer
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute) // a redrive that leaves work undone never ends
	defer cancel()
	if c := e.cliRun(wctx, "tester", &rOut, &rErr, "redrive", id, "--wait", "--interval", "100ms"); c != cli.ExitOK {
		t.Fatalf("redrive --wait: exit %d\n%s%s", c, rOut.String(), rErr.String())
	}
	inj.SetEnabled(false)
	if inj.Total() != 1 {
		t.Fatalf("%d faults injected, want the redrive's lost answer", inj.Total())
	}
	st, err := e.r.Service.Status(ctx, "tester", id)
	if err != nil || st.State != string(sm.JobSucceeded) || st.Redrives != 1 {
		t.Fatalf("after the redrive: %+v %v; want SUCCEEDED after 1 redrive", st, err)
	}
	if got := redriveJobLines(t, e, id); !slices.Equal(got, fixableLines) {
		t.Fatalf("outputs %v, want %v", got, fixableLines)
	}
	f.committedOnce(t, id, "map", 6)
	if n := f.stageRuns("map") - mapRunsBefore; n > 6 {
		t.Fatalf("the redrive ran %d map tasks", n)
	}
	h, err := e.r.Service.History(ctx, control.HistoryRequest{Owner: "tester", ID: id, Limit: 200})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(h.Events, func(ev control.Event) bool {
		return ev.Type == "job.redriven" && strings.Contains(ev.Message, "map broken on partition")
	}) {
		t.Fatalf("history has no redrive: %+v", h.Events)
	}

	// The first request's count again (its retry): no second redrive.
	zero := 0
	again, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: id, Redrives: &zero})
	if err != nil || again.Redrives != 1 || again.State != string(sm.JobSucceeded) {
		t.Fatalf("repeated redrive: %+v %v", again, err)
	}
	// A succeeded, a running and a cancelled job are refused, with why.
	var sOut, sErr syncBuffer
	if c := e.cliRun(ctx, "tester", &sOut, &sErr, "redrive", id); c != cli.ExitConflict || !strings.Contains(sErr.String(), "SUCCEEDED") {
		t.Fatalf("redrive of a succeeded job: exit %d %s", c, sErr.String())
	}
	hang := e.submit("redrive-hang", []byte(`{"name":"hang","stages":[{"name":"s","task":"hang","partitions":{"count":1}}]}`))
	one := 1
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: hang, Redrives: &zero}); !isRedriveCode(err, "job_running") {
		t.Fatalf("redrive of a running job: %v", err)
	}
	if _, err := e.r.Service.Cancel(ctx, "tester", hang); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: hang}); !isRedriveCode(err, "job_cancelled") {
		t.Fatalf("redrive of a cancelled job: %v", err)
	}
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "tester", ID: hang, Redrives: &one}); !isRedriveCode(err, "redrive_count") {
		t.Fatalf("redrive with a count the job never had: %v", err)
	}
	if _, err := e.r.Service.Redrive(ctx, control.RedriveRequest{Owner: "mallory", ID: id}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another owner's redrive: %v, want not found", err)
	}
}

func isRedriveCode(err error, code string) bool {
	var re *control.RedriveError
	return errors.As(err, &re) && re.Code == code
}

// A rerun is a new job with the same spec that runs only what the
// original did not complete (or, with --from, a stage and those after
// it) and reuses the original's committed outputs for the rest: the
// reused stages run no task, and the outputs are the same. A rerun of a
// rerun reuses from the job that committed the stage.
func TestRerunReusesCommittedStages(t *testing.T) {
	t.Parallel()
	f, reg := newFixable()
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	f.reduceBroken.Store(true)
	orig := e.submit("rerun", []byte(fixableSpec))
	if st := e.waitJob(orig, time.Minute); st.State != string(sm.JobFailed) {
		t.Fatalf("job %s (%s), want FAILED", st.State, st.Error)
	}
	f.reduceBroken.Store(false)

	rerun := func(args ...string) string {
		t.Helper()
		var out, errOut syncBuffer
		wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		if c := e.cliRun(wctx, "tester", &out, &errOut, append([]string{"rerun"}, args...)...); c != cli.ExitOK {
			t.Fatalf("rerun %v: exit %d\n%s%s", args, c, out.String(), errOut.String())
		}
		_, after, ok := strings.Cut(out.String(), "Submitted job ")
		id, _, _ := strings.Cut(after, ",")
		if !ok || id == "" {
			t.Fatalf("rerun printed no job id: %s", out.String())
		}
		return id
	}
	mapRuns := f.stageRuns("map")
	first := rerun(orig, "--wait", "--interval", "100ms")
	st, err := e.r.Service.Status(ctx, "tester", first)
	if err != nil || st.State != string(sm.JobSucceeded) || st.RerunOf != orig {
		t.Fatalf("rerun: %+v %v", st, err)
	}
	if n := f.stageRuns("map") - mapRuns; n != 0 {
		t.Fatalf("the rerun ran %d map tasks; the completed map stage should be reused", n)
	}
	if st.Stages[0].Committed != 6 || st.Stages[0].State != string(sm.StageCompleted) {
		t.Fatalf("reused stage %+v", st.Stages[0])
	}
	if got := redriveJobLines(t, e, first); !slices.Equal(got, fixableLines) {
		t.Fatalf("rerun outputs %v, want %v", got, fixableLines)
	}

	// A rerun of the rerun from its reduce: the map is still the
	// original's, which the first rerun reused.
	second := rerun(first, "--from", "reduce", "--wait", "--interval", "100ms")
	if n := f.stageRuns("map") - mapRuns; n != 0 {
		t.Fatalf("the second rerun ran %d map tasks", n)
	}
	if got := redriveJobLines(t, e, second); !slices.Equal(got, fixableLines) {
		t.Fatalf("second rerun outputs %v, want %v", got, fixableLines)
	}
	// --from the first stage reruns everything.
	third := rerun(orig, "--from", "map", "--wait", "--interval", "100ms")
	if n := f.stageRuns("map") - mapRuns; n != 6 {
		t.Fatalf("a rerun from map ran %d map tasks, want 6", n)
	}
	f.committedOnce(t, third, "map", 6)

	// Refusals: a stage that does not exist, another owner's job.
	if _, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "nope"}); err == nil || !strings.Contains(err.Error(), `no stage "nope"`) {
		t.Fatalf("rerun from a missing stage: %v", err)
	}
	if _, err := e.r.Service.Rerun(ctx, control.RerunRequest{Owner: "mallory", ID: orig}); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("another owner's rerun: %v, want not found", err)
	}
}

// The redrive conditions DynamoDB evaluates agree with the rules
// (sm.TaskRedrive, sm.StageRedrive, sm.StageRedriveBlocked, sm.JobRedrive
// and their guards) for every state.
func TestStoreRedriveConditionsAgreeWithGuards(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	table := e.r.Resources.Table
	store := e.r.Store
	now := time.Now().UTC().Truncate(time.Millisecond)
	set := func(t *testing.T, pk, sk, upd string, vals map[string]types.AttributeValue) {
		t.Helper()
		in := &dynamodb.UpdateItemInput{TableName: &table, UpdateExpression: aws.String(upd), ExpressionAttributeValues: vals,
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}}
		if len(vals) == 0 {
			in.ExpressionAttributeValues = nil
		}
		if _, err := db.UpdateItem(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	sv := func(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

	t.Run("task", func(t *testing.T) {
		const job = "jredriveguards"
		p := 0
		for _, state := range sm.Tasks.States {
			for _, tolerated := range []bool{false, true} {
				ref := domain.TaskRef{Job: job, Stage: 0, Partition: p}
				p++
				view := sm.TaskView{State: state, Attempt: 2, MaxAttempts: 2, Token: "tok", LeaseUntil: now.Add(time.Minute), Tolerated: tolerated}
				putTaskRecord(t, db, table, ref, view)
				if tolerated {
					set(t, fmt.Sprintf("TASK#%s#0#0", job), fmt.Sprintf("%06d", ref.Partition), "SET tol = :t", map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}})
				}
				_, decErr := sm.Decide(view, sm.TaskRedrive, sm.TaskInput{At: now})
				err := store.TaskRedrive(ctx, ref, 3, 1, now, now, now)
				if err != nil && !errors.Is(err, sm.ErrInvalidTransition) {
					t.Fatal(err)
				}
				if got, want := err == nil, decErr == nil; got != want {
					t.Errorf("task %s tolerated=%v: DynamoDB redrove=%v (%v), statemachine allows=%v", state, tolerated, got, err, want)
				}
			}
		}
	})

	t.Run("stage", func(t *testing.T) {
		running := e.submit("guards-running", []byte(`{"name":"g","stages":[{"name":"a","task":"work","partitions":{"count":1}}]}`))
		ended := e.submit("guards-ended", []byte(`{"name":"g","stages":[{"name":"a","task":"work","partitions":{"count":1}}]}`))
		if _, err := e.r.Service.Cancel(ctx, "tester", ended); err != nil {
			t.Fatal(err)
		}
		idx := 10
		for _, job := range []string{running, ended} {
			for _, state := range sm.Stages.States {
				for _, started := range []bool{false, true} {
					for _, ev := range []sm.Event{sm.StageRedrive, sm.StageRedriveBlocked} {
						sk := fmt.Sprintf("STAGE#%02d", idx)
						item := map[string]types.AttributeValue{"pk": sv("JOB#" + job), "sk": sv(sk), "st": sv(string(state))}
						if started {
							item["sta"] = &types.AttributeValueMemberN{Value: fmt.Sprint(now.UnixMilli())}
						}
						if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item}); err != nil {
							t.Fatal(err)
						}
						tr, lookErr := sm.Stages.Lookup(state, ev)
						allowed := lookErr == nil && job == running
						if allowed && slices.Contains(tr.Guards, sm.GuardStageStarted) {
							allowed = started
						}
						if allowed && slices.Contains(tr.Guards, sm.GuardStageNeverStarted) {
							allowed = !started
						}
						err := store.StageRedrive(ctx, job, idx, ev, now, now)
						if err != nil && !errors.Is(err, sm.ErrInvalidTransition) {
							t.Fatal(err)
						}
						if got := err == nil; got != allowed {
							t.Errorf("%s of a %s stage (started %v, job running %v): DynamoDB applied=%v (%v), statemachine allows=%v",
								ev, state, started, job == running, got, err, allowed)
						}
						idx++
					}
				}
			}
		}
	})

	t.Run("job", func(t *testing.T) {
		for _, state := range sm.Jobs.States {
			for _, c := range []struct{ had, count int }{{0, 0}, {0, 1}, {1, 1}, {1, 0}, {2, 1}} {
				job := e.submit(fmt.Sprintf("guards-job-%s-%d-%d", state, c.had, c.count), []byte(`{"name":"g","stages":[{"name":"a","task":"work","partitions":{"count":1}}]}`))
				vals := map[string]types.AttributeValue{":st": sv(string(state))}
				upd := "SET st = :st"
				if c.had > 0 {
					var l []types.AttributeValue
					for range c.had {
						l = append(l, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"at": &types.AttributeValueMemberN{Value: "1"}, "err": sv("x")}})
					}
					vals[":l"] = &types.AttributeValueMemberL{Value: l}
					upd += ", rdl = :l"
				}
				set(t, "JOB#"+job, "JOB", upd, vals)
				_, lookErr := sm.Jobs.Lookup(state, sm.JobRedrive)
				allowed := lookErr == nil && c.had == c.count // sm.GuardRedriveCount
				err := store.JobRedrive(ctx, dynamo.RedriveJobParams{ID: job, Count: c.count, Now: now, FollowUp: now})
				if err != nil && !errors.Is(err, sm.ErrInvalidTransition) {
					t.Fatal(err)
				}
				if got := err == nil; got != allowed {
					t.Errorf("redrive of a %s job redriven %d times, naming %d: DynamoDB applied=%v (%v), rules allow=%v", state, c.had, c.count, got, err, allowed)
				}
			}
		}
	})
}
