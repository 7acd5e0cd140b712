package integration

// One valid spec must not be able to take the api or the sweep down, nor
// stall the sweep for every other owner (security review 2026-11-23,
// finding 2): planning checks its limits before it allocates, listings
// stop at a budget, manifests are written and read in pages, and the sweep
// survives a record whose work panics or never returns.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A 10 MiB object in one-byte splits is ten million splits. A submission
// asking for that is refused by the spec's floor; a job stored before the
// floor existed (its spec is never validated again) fails when the sweep
// plans it, with the field to change, and the sweep's heap stays small:
// the splits are counted, never made.
//
// Not parallel: the heap is measured, and parallel tests wait while a
// sequential one runs.
func TestTinySplitSizeFailsWithoutBuildingSplits(t *testing.T) {
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	big := bytes.Repeat([]byte("0123456789abcde\n"), (10<<20)/16)
	in := e.putInput("tester", "in/big.txt", big)
	in = strings.TrimSuffix(in, "big.txt")
	big = nil
	body := func(splitSize int) string {
		return fmt.Sprintf(`{"name":"tiny","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":%q,"splitSize":%d}}}]}`, in, splitSize)
	}

	_, err := rig.svc.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "tiny", Spec: []byte(body(1))})
	var ve *spec.ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "stages[0].partitions.input.splitSize" {
		t.Fatalf("submit with splitSize 1: %v, want the field refused", err)
	}

	sp, err := spec.Parse([]byte(body(int(spec.MinSplitSize))))
	if err != nil {
		t.Fatal(err)
	}
	sp.Stages[0].Partitions.Input.SplitSize = 1
	id, now := control.NewJobID(), rig.clk.Now()
	if _, _, err := e.r.Store.JobCreate(ctx, dynamo.CreateJobParams{
		Job:     domain.Job{ID: id, Owner: "tester", Spec: sp, SpecHash: sp.Hash(), Created: now},
		IdemKey: "stored-before-the-floor", StageDue: now, IdemTTL: time.Hour,
	}); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mustSweep(t, rig.svc)
	runtime.ReadMemStats(&after)
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("the sweep that planned 10 MiB in one-byte splits allocated %.1f MiB; heap in use %.1f MiB before, %.1f MiB after",
		float64(allocated)/(1<<20), float64(before.HeapInuse)/(1<<20), float64(after.HeapInuse)/(1<<20))

	js := jobState(t, rig.svc, id)
	want := fmt.Sprintf("stages[0].partitions.input.splitSize: %s in splits of 1 bytes gives 10485760 splits, more than %d; raise splitSize",
		in, spec.MaxPartitions)
	if js.State != string(sm.JobFailed) || !strings.Contains(js.Error, want) {
		t.Fatalf("job %s (%q), want FAILED with %q", js.State, js.Error, want)
	}
	if _, err := e.r.Blob.Get(ctx, blob.PlanKey(id, "s")); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("plan object of the refused stage: %v, want none", err)
	}
	// Ten million 32-byte splits were 320 MiB.
	if allocated > 64<<20 {
		t.Errorf("the sweep allocated %d MiB while planning, want under 64", allocated>>20)
	}
}

// An input prefix with more objects than the listing budget fails its
// job at once with the field to change; one at the budget plans.
func TestInputPrefixOverListLimitFails(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	for i := range 6 {
		for _, dir := range []string{"six", "five"} {
			if dir == "five" && i == 5 {
				continue
			}
			e.putInput("tester", fmt.Sprintf("%s/part-%d.txt", dir, i), []byte("a line\n"))
		}
	}
	limited := e.r.Blob.WithListLimit(blob.ListLimit{Objects: 5})
	svc := newServiceWithBlob(e, testTimings, e.r.Store, limited, rig.clk, rig.logs)
	specFor := func(dir string) string {
		return fmt.Sprintf(`{"name":"list","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"%s%s/"}}}]}`, e.inputsURI("tester"), dir)
	}

	over := submitTo(t, svc, "six", specFor("six"))
	js := jobState(t, svc, over)
	want := fmt.Sprintf("stages[0].partitions.input.prefix: %ssix/ has more than 5 objects; name a narrower prefix", e.inputsURI("tester"))
	if js.State != string(sm.JobFailed) || !strings.Contains(js.Error, want) {
		t.Fatalf("job over the budget: %s (%q), want FAILED with %q", js.State, js.Error, want)
	}

	at := submitTo(t, svc, "five", specFor("five"))
	if js := jobState(t, svc, at); js.State != string(sm.JobRunning) {
		t.Fatalf("job at the budget: %s (%q), want RUNNING", js.State, js.Error)
	}
	if st, err := e.r.Store.StageGet(ctx, at, 0); err != nil || st.Total != 5 || !st.Materialized {
		t.Fatalf("stage at the budget: %+v (%v), want 5 tasks materialized", st, err)
	}
}

// A word count whose map stage has many tasks times shuffle parts writes a
// paged manifest, no page over the page size, and the reduce stage reads
// every part through the pages: the counts are exact. The job's manifest
// is paged too, and the outputs API pages through it.
func TestPagedShuffleManifest(t *testing.T) {
	t.Parallel()
	const pageSize, reducers, splitSize = 4, 5, 4096
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx, clk, logs := context.Background(), newTestClock(), newLogCounter()
	cfg := testTimings
	cfg.ManifestPageSize = pageSize
	svc := newServiceWithBlob(e, cfg, e.r.Store, e.r.Blob, clk, logs)
	exec := &executor.Runner{CP: svc, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: logs.logger()}
	corpus := wordcount.Corpus(5, 45_000)
	e.putInput("tester", "input/corpus.txt", corpus)
	id := submitTo(t, svc, "wc", string(wordcount.Spec("wc", "inputs:input/", splitSize, reducers)))
	work(t, e, exec)
	js := wantSucceeded(t, svc, id)

	maps := int(split.Count([]split.Object{{Key: "corpus.txt", Size: int64(len(corpus))}}, splitSize))
	m, err := blob.ReadManifest(ctx, e.r.Blob, blob.StageManifestKey(id, "map"))
	if err != nil {
		t.Fatal(err)
	}
	// One output per map task: its shuffle partitions in one indexed
	// object (shared/blob/shuffle.go).
	outputs := maps
	if wantPages := (outputs + pageSize - 1) / pageSize; m.Len() != outputs || len(m.Pages) != wantPages || len(m.Outputs) != 0 {
		t.Fatalf("map manifest: %d outputs in %d pages (%d inline); want %d (one per task, each holding its %d parts) in %d pages",
			m.Len(), len(m.Pages), len(m.Outputs), outputs, reducers, wantPages)
	}
	seen := map[string]bool{}
	for i := range m.Pages {
		outs, err := blob.ManifestPage(ctx, e.r.Blob, m, i)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) > pageSize {
			t.Errorf("page %s holds %d outputs, more than %d", m.Pages[i], len(outs), pageSize)
		}
		for _, o := range outs {
			seen[o.Key] = true
		}
	}
	if len(seen) != outputs {
		t.Errorf("the pages name %d distinct outputs, want %d", len(seen), outputs)
	}

	// The job's manifest (the reduce outputs) is paged too; the API reads
	// it in pages of two.
	if jm, err := blob.ReadManifest(ctx, e.r.Blob, js.Manifest); err != nil || len(jm.Pages) != 2 || jm.Len() != reducers {
		t.Fatalf("job manifest: %d pages, %d outputs (%v); want 2 pages of the %d reduce outputs", len(jm.Pages), jm.Len(), err, reducers)
	}
	got := map[string]int{}
	cur := ""
	for range reducers {
		page, err := svc.Outputs(ctx, control.OutputsRequest{Owner: "tester", ID: id, Limit: 2, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Outputs {
			addWordCounts(t, e, got, o.Key)
		}
		if cur = page.NextCursor; cur == "" {
			break
		}
	}
	want := referenceCounts(string(corpus))
	if len(got) != len(want) {
		t.Errorf("distinct words: got %d, want %d", len(got), len(want))
	}
	for w, n := range want {
		if got[w] != n {
			t.Errorf("count of %q: got %d, want %d", w, got[w], n)
		}
	}
}

// poisonedList is the env's bucket with the listing of one prefix
// poisoned: it fails as a throttled S3 does, or panics (standing in for
// the out-of-memory crash no handler sees), or is stuck whatever its
// context says until the test ends.
type poisonedList struct {
	control.Blob
	prefix  string
	release chan struct{}

	mu    sync.Mutex
	mode  string
	calls int
}

func (p *poisonedList) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

func (p *poisonedList) callCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

func (p *poisonedList) List(ctx context.Context, bucket, prefix string) ([]split.Object, error) {
	if !strings.HasPrefix(prefix, p.prefix) {
		return p.Blob.List(ctx, bucket, prefix)
	}
	p.mu.Lock()
	mode := p.mode
	p.calls++
	p.mu.Unlock()
	switch mode {
	case "fail":
		return nil, errors.New("SlowDown (injected)")
	case "panic":
		panic("runtime: out of memory (injected)")
	case "stuck":
		<-p.release
		return nil, errors.New("released")
	}
	return p.Blob.List(ctx, bucket, prefix)
}

// stageDue reads a stage's place in the sweep index straight from the
// table (zero: not in it).
func stageDue(t *testing.T, e *env, job string, idx int) time.Time {
	t.Helper()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "JOB#" + job},
			"sk": &types.AttributeValueMemberS{Value: fmt.Sprintf("STAGE#%02d", idx)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := out.Item["due"].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms).UTC()
}

// A stage whose planning crashes (a panic standing in for running out of
// memory) or never returns must not stall the sweep for everyone: the same
// run resends another owner's lost message, redrives the dead-letter
// queue and fires a due schedule; the poisoned stage's next look moves
// back, so the following runs do not meet it, and back further each time.
func TestSweepSurvivesPoisonedStage(t *testing.T) {
	t.Parallel()
	cases := []struct {
		mode    string
		wantErr error
	}{
		{"panic", control.ErrStepPanicked},
		{"stuck", control.ErrStepOverBudget},
	}
	for _, c := range cases {
		t.Run(c.mode, func(t *testing.T) {
			t.Parallel()
			rig := newSweepRig(t, testTimings)
			e, ctx := rig.e, context.Background()
			poison := &poisonedList{Blob: e.r.Blob, prefix: blob.InputsPrefix(principal.Key("tester")) + "poison/", mode: "fail", release: make(chan struct{})}
			t.Cleanup(func() { close(poison.release) })
			svc := newServiceWithBlob(e, testTimings, e.r.Store, poison, rig.clk, rig.logs)
			e.putInput("tester", "poison/a.txt", []byte("a line\n"))
			// Planning is throttled at the submit, so the stage waits for
			// the sweep, which meets the poison.
			bad := submitTo(t, svc, "bad", `{"name":"bad","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:poison/"}}}]}`)
			poison.set(c.mode)

			// Another owner's job lost its message, and has one in the DLQ.
			// (A one-task stage: its task is in the sweep index on its own
			// and resent at StuckAfter; a chunk's tasks whose send SQS
			// acknowledged wait SentWait, TestSweepResendsLostMessage.)
			good := submitTo(t, svc, "good", oneStage("good", "work", 1))
			for _, m := range receiveVisible(t, e, e.r.Resources.Queues.Normal) {
				if err := e.r.Queue.DeleteBatch(ctx, e.r.Resources.Queues.Normal, []string{m.Receipt}); err != nil {
					t.Fatal(err)
				}
			}
			dead := domain.TaskRef{Job: good, Stage: 0, Partition: 0}
			if err := e.r.Queue.SendBatch(ctx, e.r.Resources.Queues.DLQ, []queue.Send{{Body: dead.String()}}); err != nil {
				t.Fatal(err)
			}
			// And a schedule is due.
			start := rig.clk.Now().Add(30 * time.Second).Truncate(time.Second)
			if _, err := svc.CreateSchedule(ctx, "alice", []byte(fmt.Sprintf(`{"name":"soon","expression":"rate(1 hour)","start":%q,"spec":%s}`,
				start.Format(time.RFC3339), schedJobSpec))); err != nil {
				t.Fatal(err)
			}
			rig.clk.Advance(2 * time.Minute)

			st, err := e.r.Store.StageGet(ctx, bad, 0)
			if err != nil || st.State != sm.StageRunning || st.Materialized {
				t.Fatalf("poisoned stage %+v (%v), want RUNNING and not materialized", st, err)
			}
			now := rig.clk.Now()
			runCtx, cancel := context.WithTimeout(ctx, 9*time.Second)
			defer cancel()
			counts, err := svc.Sweep(runCtx)
			if !errors.Is(err, c.wantErr) || counts.Errors != 1 {
				t.Fatalf("sweep: %v, counts %+v; want one error, %v", err, counts, c.wantErr)
			}
			if counts.Requeued < 1 || counts.DeadLettered != 1 || counts.Fired != 1 {
				t.Errorf("counts %+v: want the lost messages resent, the dead letter redriven and the schedule fired", counts)
			}
			if jobs, err := svc.ListJobs(ctx, control.ListJobsRequest{Owner: "alice", Limit: 10}); err != nil || len(jobs.Jobs) != 1 {
				t.Errorf("alice's jobs %+v (%v), want the schedule's firing", jobs.Jobs, err)
			}
			if poison.callCount() != 2 {
				t.Fatalf("poisoned listing called %d times, want the submit's and this sweep's", poison.callCount())
			}
			// The stage has been pending since it started: its next look is
			// as far off.
			first := stageDue(t, e, bad, 0)
			if want := now.Add(now.Sub(st.Started)).Truncate(time.Millisecond); !first.Equal(want) {
				t.Errorf("poisoned stage due %v, want %v (now + %v pending)", first, want, now.Sub(st.Started))
			}
			// The next runs, before it is due, do not meet it.
			mustSweep(t, svc)
			if poison.callCount() != 2 {
				t.Errorf("a sweep before the stage was due again listed it")
			}
			// Due again, it is met again, and pushed back further.
			rig.clk.Advance(first.Sub(rig.clk.Now()))
			runCtx2, cancel2 := context.WithTimeout(ctx, 9*time.Second)
			defer cancel2()
			if _, err := svc.Sweep(runCtx2); !errors.Is(err, c.wantErr) {
				t.Fatalf("the sweep that meets the stage again: %v, want %v", err, c.wantErr)
			}
			if poison.callCount() != 3 {
				t.Errorf("poisoned listing called %d times, want 3", poison.callCount())
			}
			if second := stageDue(t, e, bad, 0); second.Sub(rig.clk.Now()) <= first.Sub(now) {
				t.Errorf("the stage's wait went from %v to %v, want it to grow", first.Sub(now), second.Sub(rig.clk.Now()))
			}
			if js := jobState(t, svc, bad); js.State != string(sm.JobRunning) {
				t.Errorf("poisoned job %s (%s), want RUNNING: a crash is no verdict on its input", js.State, js.Error)
			}
		})
	}
}
