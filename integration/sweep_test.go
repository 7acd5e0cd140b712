package integration

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The sweep's repairs, driven by hand: each test runs Service.Sweep itself
// on an injected clock instead of waiting for leases, backoffs and due
// times, and checks the records, the queues and the outputs it leaves.

// sweepRig is one test's installation with the control plane in the
// test's hands: nothing runs unless the test runs it.
type sweepRig struct {
	e    *env
	clk  *testClock
	logs *logCounter
	cfg  control.Config
	svc  *control.Service // the API's and the sweep's control plane
	exec *executor.Runner // a healthy executor
	// runs counts task function runs by task id.
	mu   sync.Mutex
	runs map[string]int
}

// newSweepRig registers "work" (writes one line) and "flaky" (fails its
// first attempt) and builds the rig with timings cfg.
func newSweepRig(t *testing.T, cfg control.Config) *sweepRig {
	t.Helper()
	rig := &sweepRig{clk: newTestClock(), logs: newLogCounter(), cfg: cfg, runs: map[string]int{}}
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		rig.ran(t)
		_, err := fmt.Fprintf(t.Out, "%s attempt %d\n", ranID(t), t.Attempt)
		return err
	})
	reg.Register("flaky", func(ctx context.Context, t *batchwork.Task) error {
		rig.ran(t)
		if t.Attempt == 1 {
			return errors.New("flaky: first attempt fails")
		}
		_, err := fmt.Fprintf(t.Out, "%s attempt %d\n", ranID(t), t.Attempt)
		return err
	})
	rig.e = newEnv(t, reg, envOptions{noRun: true})
	rig.svc = rig.service(rig.e.r.Store, rig.e.r.Queue)
	rig.exec = rig.executor(rig.svc)
	return rig
}

func (r *sweepRig) ran(t *batchwork.Task) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs[ranID(t)]++
}

// ranID names a task by job, stage name and partition, what a task
// function knows of itself.
func ranID(t *batchwork.Task) string { return fmt.Sprintf("%s/%s/%d", t.Job, t.Stage, t.Partition) }

// ranIDs are the ranIDs of the n tasks of a stage.
func ranIDs(job, stage string, n int) []string {
	var out []string
	for p := 0; p < n; p++ {
		out = append(out, fmt.Sprintf("%s/%s/%d", job, stage, p))
	}
	return out
}

// runCount is how many times the task ranID names ran.
func (r *sweepRig) runCount(ref string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.runs[ref]
}

// service is another process's control plane over the same installation.
func (r *sweepRig) service(store control.Store, q control.Queue) *control.Service {
	return newService(r.e, r.cfg, store, q, r.clk, r.logs.logger())
}

func (r *sweepRig) executor(cp executor.ControlPlane) *executor.Runner {
	return &executor.Runner{CP: cp, Blob: r.e.r.Blob, Registry: executor.PublicRegistry(r.e.reg), Log: r.logs.logger()}
}

func oneStage(name, task string, n int) string {
	return fmt.Sprintf(`{"name":%q,"stages":[{"name":"s","task":%q,"partitions":{"count":%d}}]}`, name, task, n)
}

func bodies(hs []handled) []string {
	var out []string
	for _, h := range hs {
		out = append(out, h.Body)
	}
	sort.Strings(out)
	return out
}

func taskIDs(job string, stage, n int) []string {
	var out []string
	for p := 0; p < n; p++ {
		out = append(out, domain.TaskRef{Job: job, Stage: stage, Partition: p}.String())
	}
	sort.Strings(out)
	return out
}

func wantSucceeded(t *testing.T, svc *control.Service, id string) control.JobStatus {
	t.Helper()
	js := jobState(t, svc, id)
	if js.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED: %+v", js.State, js.Error, js)
	}
	return js
}

// A task is READY but its message is gone after SQS acknowledged it. SQS
// does not lose such a message, so the sweep takes a task still waiting
// then for one behind its stage's backlog and leaves it alone until it has
// waited SentWait, then sends exactly one message, and the job completes
// with each task run once. (A chunk whose send was never confirmed is
// resent at StuckAfter: TestSweepResendsUnconfirmedChunkAtStuckAfter.)
func TestSweepResendsLostMessage(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ready := rig.e, rig.e.r.Resources.Queues.Normal
	ctx := context.Background()
	id := submitTo(t, rig.svc, "lost", oneStage("lost", "work", 3))

	// Lose every message: received and deleted, never claimed.
	lost := receiveVisible(t, e, ready)
	if got := len(lost); got != 3 {
		t.Fatalf("%d messages after submit, want 3", got)
	}
	for _, m := range lost {
		if err := e.r.Queue.DeleteBatch(ctx, ready, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}
	if n := messagesIn(t, e, ready); n != 0 {
		t.Fatalf("%d messages left after losing them all", n)
	}

	at := time.Duration(0)
	for _, next := range []time.Duration{0, testTimings.StuckAfter + time.Second, dynamo.SentWait / 2, dynamo.SentWait - time.Second} {
		rig.clk.Advance(next - at)
		at = next
		if c := mustSweep(t, rig.svc); c.Requeued != 0 {
			t.Fatalf("sweep %s after submit, before SentWait, requeued %d tasks: %+v", at, c.Requeued, c)
		}
	}
	rig.clk.Advance(dynamo.SentWait + time.Second - at)
	if c := mustSweep(t, rig.svc); c.Requeued != 3 {
		t.Fatalf("sweep after SentWait requeued %d tasks, want 3: %+v", c.Requeued, c)
	}
	// Resent once: the next run waits longer.
	if c := mustSweep(t, rig.svc); c.Requeued != 0 {
		t.Fatalf("an immediate second sweep requeued %d more", c.Requeued)
	}
	if n := messagesIn(t, e, ready); n != 3 {
		t.Fatalf("%d messages after the sweep, want 3", n)
	}

	hs := work(t, e, rig.exec)
	if got, want := bodies(hs), taskIDs(id, 0, 3); !slices.Equal(got, want) {
		t.Fatalf("handled %v, want one message per task %v", got, want)
	}
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, 3, 1)
}

// errCrash is the injected failure: the process died in this call.
var errCrash = errors.New("injected crash")

// crasher decides which call of which operation crashes: call n (1-based)
// of op, or every call when n is 0. keep is how much of the crashing
// call's work reaches AWS first (tasks written, messages sent).
type crasher struct {
	op   string
	also []string // more operations that crash, every time
	n    int
	keep int

	mu    sync.Mutex
	calls map[string]int
	fired int
}

func (c *crasher) crashes(op string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[op]++
	if op == c.op && (c.n == 0 || c.calls[op] == c.n) || slices.Contains(c.also, op) {
		c.fired++
		return true
	}
	return false
}

func (c *crasher) firedCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fired
}

// faultStore is the real store with one operation crashing; every other
// call goes to DynamoDB unchanged. It injects the fault, it fakes nothing.
type faultStore struct {
	control.Store
	c *crasher
}

func (f *faultStore) StageSetPlan(ctx context.Context, job string, idx, total int) (domain.Stage, error) {
	if f.c.crashes("StageSetPlan") {
		return domain.Stage{}, errCrash
	}
	return f.Store.StageSetPlan(ctx, job, idx, total)
}

func (f *faultStore) ShardPut(ctx context.Context, job string, idx, total, shards int) error {
	if f.c.crashes("ShardPut") {
		return errCrash
	}
	return f.Store.ShardPut(ctx, job, idx, total, shards)
}

func (f *faultStore) TaskPutMany(ctx context.Context, tasks []domain.Task, due time.Time) error {
	if f.c.crashes("TaskPutMany") {
		if err := f.Store.TaskPutMany(ctx, tasks[:min(f.c.keep, len(tasks))], due); err != nil {
			return err
		}
		return errCrash
	}
	return f.Store.TaskPutMany(ctx, tasks, due)
}

func (f *faultStore) StageMarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error {
	if f.c.crashes("StageMarkMaterialized") {
		return errCrash
	}
	return f.Store.StageMarkMaterialized(ctx, job, idx, due)
}

// CommitTask crashes after the commit transaction: the task is committed
// and counted, but its committer never runs the completion check.
func (f *faultStore) TaskCommit(ctx context.Context, p dynamo.CommitParams) (bool, error) {
	done, err := f.Store.TaskCommit(ctx, p)
	if err == nil && f.c.crashes("TaskCommit") {
		return false, errCrash
	}
	return done, err
}

// EnsureCounted crashes before it reads anything: a refused claim of a
// committed task neither counts it nor runs its stage's follow-up.
func (f *faultStore) ShardEnsureCounted(ctx context.Context, ref domain.TaskRef, shards int) (bool, bool, error) {
	if f.c.crashes("ShardEnsureCounted") {
		return false, false, errCrash
	}
	return f.Store.ShardEnsureCounted(ctx, ref, shards)
}

// faultQueue is the real queue with SendBatch crashing after sending keep
// messages.
type faultQueue struct {
	control.Queue
	c *crasher
}

func (f *faultQueue) SendBatch(ctx context.Context, url string, msgs []queue.Send) error {
	if f.c.crashes("SendBatch") {
		if err := f.Queue.SendBatch(ctx, url, msgs[:min(f.c.keep, len(msgs))]); err != nil {
			return err
		}
		return errCrash
	}
	return f.Queue.SendBatch(ctx, url, msgs)
}

// A stage is RUNNING but the process that started it died before its
// tasks were all written, sent and recorded. The sweep finishes the
// materialization: every task exists once, tasks that ran meanwhile keep
// their commit, nothing is counted twice, and the job completes with each
// task run exactly once.
func TestSweepFinishesInterruptedMaterialization(t *testing.T) {
	t.Parallel()
	const n = 5
	// Chunks of two tasks (0-1, 2-3, 4), so a crash can fall between and
	// inside chunks.
	cfg := testTimings
	cfg.ChunkTasks = 2
	cases := []struct {
		name       string
		op         string // the operation that crashes,
		call, keep int    // on which call, after how many tasks or messages
		sentBefore int    // messages on the queue when the process died
	}{
		{"plan not recorded", "StageSetPlan", 1, 0, 0},
		{"counters not created", "ShardPut", 1, 0, 0},
		{"no task written", "TaskPutMany", 1, 0, 0},
		{"first chunk half written", "TaskPutMany", 1, 1, 0},
		{"second chunk half written", "TaskPutMany", 2, 1, 2},
		{"second chunk written, not sent", "SendBatch", 2, 0, 2},
		{"second chunk half sent", "SendBatch", 2, 1, 3},
		{"last chunk sent, not recorded", "SendBatch", 3, 1, 5},
		{"all sent, not marked materialized", "StageMarkMaterialized", 1, 0, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rig := newSweepRig(t, cfg)
			e, ready := rig.e, rig.e.r.Resources.Queues.Normal
			ctx := context.Background()
			crash := &crasher{op: tc.op, n: tc.call, keep: tc.keep}
			dying := rig.service(&faultStore{Store: e.r.Store, c: crash}, &faultQueue{Queue: e.r.Queue, c: crash})
			id := submitTo(t, dying, "mat", oneStage("mat", "work", n))
			if crash.firedCount() != 1 {
				t.Fatalf("the crash in %s call %d did not happen", crash.op, crash.n)
			}
			st, err := e.r.Store.StageGet(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != sm.StageRunning || st.Materialized {
				t.Fatalf("after the crash: stage %s materialized=%v, want RUNNING and not materialized", st.State, st.Materialized)
			}
			if got := messagesIn(t, e, ready); got != tc.sentBefore {
				t.Fatalf("%d messages sent before the crash, want %d", got, tc.sentBefore)
			}
			// Executors run what was sent before the sweep comes by.
			early := work(t, e, rig.exec)
			if len(early) != tc.sentBefore {
				t.Fatalf("executors handled %d messages before the repair, want %d", len(early), tc.sentBefore)
			}
			committedEarly := map[string]bool{}
			for _, h := range early {
				if h.Result.Action != feed.Delete || h.Result.Err != nil {
					t.Fatalf("early message %s: %+v, want committed", h.Body, h.Result)
				}
				committedEarly[h.Body] = true
			}

			rig.clk.Advance(cfg.StartGrace + time.Second)
			c := mustSweep(t, rig.svc)
			if c.StagesFixed == 0 {
				t.Fatalf("sweep fixed no stage: %+v", c)
			}
			st, err = e.r.Store.StageGet(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Materialized || st.Total != n {
				t.Fatalf("after the sweep: materialized=%v total %d, want materialized with %d tasks", st.Materialized, st.Total, n)
			}
			tasks := stageTasks(t, e, id, 0)
			if len(tasks) != n {
				t.Fatalf("%d task records, want %d", len(tasks), n)
			}
			for p, task := range tasks {
				want := sm.TaskReady
				if committedEarly[task.Ref.String()] {
					want = sm.TaskSucceeded
				}
				if task.Ref.Partition != p || task.State != want {
					t.Errorf("task %s is %s, want partition %d %s (the repair must not reset a task that ran)", task.Ref, task.State, p, want)
				}
			}

			work(t, e, rig.exec)
			// A stage whose tasks all committed before it was marked
			// materialized is completed by the sweep's next check.
			rig.clk.Advance(cfg.CheckEvery + time.Second)
			mustSweep(t, rig.svc)
			js := wantSucceeded(t, rig.svc, id)
			assertCommittedOnce(t, e, id, 0, n, 1)
			for _, ref := range ranIDs(id, "s", n) {
				if runs := rig.runCount(ref); runs != 1 {
					t.Errorf("task %s ran %d times, want once", ref, runs)
				}
			}
			if m := readManifest(t, e, js.Manifest); len(m.Outputs) != n {
				t.Errorf("manifest lists %d outputs, want %d", len(m.Outputs), n)
			}
		})
	}
}

// Dead letters: a live task's message goes back to its ready queue and the
// job completes; a finished task's is dropped; one that names no task
// stays for an operator.
func TestSweepMovesDeadLetters(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, q := rig.e, rig.e.r.Resources.Queues
	ctx := context.Background()
	id := submitTo(t, rig.svc, "dlq", oneStage("dlq", "work", 2))
	live, done := domain.TaskRef{Job: id, Stage: 0, Partition: 0}, domain.TaskRef{Job: id, Stage: 0, Partition: 1}

	msgs := receiveVisible(t, e, q.Normal)
	if len(msgs) != 2 {
		t.Fatalf("%d messages after submit, want 2", len(msgs))
	}
	var liveMsg queue.Message
	for _, m := range msgs {
		if m.Body == live.String() {
			liveMsg = m
			continue
		}
		// Task 1 runs and commits; a stray copy of its message is
		// dead-lettered below.
		res := rig.exec.Handle(ctx, feed.Delivery{Body: m.Body}, nil)
		if res.Action != feed.Delete || res.Err != nil {
			t.Fatalf("task 1: %+v, want committed", res)
		}
		if err := e.r.Queue.DeleteBatch(ctx, q.Normal, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}
	// Task 0's message is delivered again and again without being claimed
	// until the queue's redrive policy moves it to the DLQ.
	receipt := liveMsg.Receipt
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatalf("task 0's message was not dead-lettered after %d receives", i)
		}
		if err := e.r.Queue.ChangeVisibility(ctx, q.Normal, receipt, 0); err != nil {
			t.Fatal(err)
		}
		again, err := e.r.Queue.Receive(ctx, q.Normal, 1, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(again) == 0 {
			break
		}
		receipt = again[0].Receipt
	}
	if err := e.r.Queue.SendBatch(ctx, q.DLQ, []queue.Send{{Body: done.String()}, {Body: "not a task id"}}); err != nil {
		t.Fatal(err)
	}
	if n, m := messagesIn(t, e, q.DLQ), messagesIn(t, e, q.Normal); n != 3 || m != 0 {
		t.Fatalf("DLQ holds %d messages and the ready queue %d, want 3 and 0", n, m)
	}

	c := mustSweep(t, rig.svc)
	if c.DeadLettered != 2 {
		t.Errorf("sweep handled %d dead letters, want 2 (the live task's and the finished task's)", c.DeadLettered)
	}
	if n := messagesIn(t, e, q.DLQ); n != 1 {
		t.Errorf("DLQ holds %d messages after the sweep, want 1 (the one naming no task)", n)
	}
	hs := work(t, e, rig.exec)
	if got := bodies(hs); !slices.Equal(got, []string{live.String()}) {
		t.Fatalf("ready queue after the sweep held %v, want only the live task %s", got, live)
	}
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, 2, 1)
}

// A retry whose backoff (40 minutes) is longer than SQS can delay a message
// (15 minutes) is enforced by the task record: a claim before its time is
// refused as not due, and the sweep sends its message when it is due.
func TestSweepResendsAfterLongBackoff(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ready := rig.e, rig.e.r.Resources.Queues.Normal
	ctx := context.Background()
	const backoff = 40 * time.Minute
	id := submitTo(t, rig.svc, "slow", `{"name":"slow","stages":[{"name":"s","task":"flaky","partitions":{"count":1},
	  "retry":{"maxAttempts":2,"backoff":"40m"}}]}`)
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}
	failedAt := rig.clk.Now()

	// Attempt 1 fails; the executor hides its message for the backoff,
	// as the poller does.
	hs := work(t, e, rig.exec)
	if len(hs) != 1 || hs[0].Result.Action != feed.Hide || hs[0].Result.Delay != backoff {
		t.Fatalf("first attempt: %+v, want Hide for %s", hs, backoff)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if !task.NotBefore.Equal(failedAt.Add(backoff)) || task.State != sm.TaskReady || task.Attempt != 1 {
		t.Fatalf("task after the failure: %s attempt %d not before %s; want READY attempt 1 not before %s",
			task.State, task.Attempt, task.NotBefore, failedAt.Add(backoff))
	}

	// Past SQS's longest delay, before the backoff ends: not runnable.
	rig.clk.Advance(queue.MaxDelay + 5*time.Minute)
	_, err = rig.svc.Claim(ctx, ref)
	var notDue *domain.NotDueError
	if !errors.As(err, &notDue) || !notDue.At.Equal(task.NotBefore) {
		t.Fatalf("claim 20 minutes into a 40-minute backoff: %v, want not due until %s", err, task.NotBefore)
	}
	if c := mustSweep(t, rig.svc); c.Requeued != 0 {
		t.Fatalf("sweep during the backoff requeued %d", c.Requeued)
	}
	if after, err := e.r.Store.TaskGet(ctx, ref); err != nil || after.State != sm.TaskReady || after.Attempt != 1 {
		t.Fatalf("task after an early claim and sweep: %+v %v; want unchanged, READY attempt 1", after, err)
	}

	// Due: the sweep sends a message, which runs attempt 2.
	rig.clk.Advance(backoff - queue.MaxDelay - 5*time.Minute + testTimings.StuckAfter + time.Second)
	if c := mustSweep(t, rig.svc); c.Requeued != 1 {
		t.Fatalf("sweep after the backoff requeued %d, want 1: %+v", c.Requeued, c)
	}
	hs = work(t, e, rig.exec)
	if len(hs) != 1 || hs[0].Result.Action != feed.Delete || hs[0].Result.Err != nil {
		t.Fatalf("second attempt: %+v, want committed", hs)
	}
	if n := messagesIn(t, e, ready); n != 1 {
		t.Errorf("%d messages left, want 1 (the first attempt's, hidden for the backoff)", n)
	}
	wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, 1, 2)
}

// sweepConcurrently runs one sweep on each service at the same time.
func sweepConcurrently(t *testing.T, svcs ...*control.Service) control.SweepCounts {
	t.Helper()
	start := make(chan struct{})
	counts := make([]control.SweepCounts, len(svcs))
	errs := make([]error, len(svcs))
	var wg sync.WaitGroup
	for i, s := range svcs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			counts[i], errs[i] = s.Sweep(context.Background())
		}()
	}
	close(start)
	wg.Wait()
	var sum control.SweepCounts
	for i := range svcs {
		if errs[i] != nil {
			t.Fatalf("sweep %d: %v", i, errs[i])
		}
		sum.Examined += counts[i].Examined
		sum.Requeued += counts[i].Requeued
		sum.Expired += counts[i].Expired
		sum.StagesFixed += counts[i].StagesFixed
	}
	return sum
}

// Two sweeps over the same due work at once: expired leases are taken back
// once each, a stage whose committers died is completed once, its
// downstream stage is started and materialized once, and the job succeeds
// once, with every task committed once.
func TestConcurrentSweepsAreHarmless(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e := rig.e
	sweepA := rig.service(e.r.Store, e.r.Queue)
	sweepB := rig.service(e.r.Store, e.r.Queue)
	// Executors whose process dies right after each commit transaction,
	// and on each refused claim of a committed task (which would finish
	// the stage's follow-up), so stage completion is left to the sweeps.
	dying := rig.executor(rig.service(&faultStore{Store: e.r.Store, c: &crasher{op: "TaskCommit", also: []string{"ShardEnsureCounted"}}}, e.r.Queue))
	id := submitTo(t, rig.svc, "twice", `{"name":"twice","stages":[
	  {"name":"a","task":"work","partitions":{"count":3}},
	  {"name":"b","task":"work","after":["a"],"partitions":{"count":2}}]}`)

	// Every task of a is claimed by an executor that then vanishes.
	for p := 0; p < 3; p++ {
		mustClaim(t, rig.svc, domain.TaskRef{Job: id, Stage: 0, Partition: p})
	}
	rig.clk.Advance(2*time.Minute + time.Second) // lease and grace, 60 s each
	if c := sweepConcurrently(t, sweepA, sweepB); c.Expired != 3 {
		t.Fatalf("two sweeps expired %d leases in all, want 3 (once each): %+v", c.Expired, c)
	}
	for _, task := range stageTasks(t, e, id, 0) {
		if task.State != sm.TaskReady || task.Attempt != 1 {
			t.Fatalf("task %s: %s attempt %d, want READY after attempt 1", task.Ref, task.State, task.Attempt)
		}
	}

	// The original messages and the sweeps' copies: each task runs once
	// more and commits; its other messages are dropped.
	hs := work(t, e, dying)
	commits := 0
	for _, h := range hs {
		switch {
		case errors.Is(h.Result.Err, errCrash):
			commits++
		case h.Result.Action != feed.Delete || !errors.Is(h.Result.Err, domain.ErrAlreadyDone):
			t.Errorf("message %s: %+v, want a commit or a dropped duplicate", h.Body, h.Result)
		}
	}
	if commits != 3 {
		t.Fatalf("%d commits of stage a, want 3", commits)
	}

	completed, started := rig.logs.count("stage completed"), rig.logs.count("stage started")
	rig.clk.Advance(testTimings.CheckEvery + time.Second)
	sweepConcurrently(t, sweepA, sweepB)
	if d := rig.logs.count("stage completed") - completed; d != 1 {
		t.Errorf("stage a completed %d times, want once", d)
	}
	if d := rig.logs.count("stage started") - started; d != 1 {
		t.Errorf("stage b started %d times, want once", d)
	}
	hs = work(t, e, dying)
	if got, want := bodies(hs), taskIDs(id, 1, 2); !slices.Equal(got, want) {
		t.Fatalf("stage b's messages %v, want one per task %v", got, want)
	}

	rig.clk.Advance(testTimings.CheckEvery + time.Second)
	sweepConcurrently(t, sweepA, sweepB)
	if n := rig.logs.count("job succeeded"); n != 1 {
		t.Errorf("job succeeded %d times, want once", n)
	}
	js := wantSucceeded(t, rig.svc, id)
	assertCommittedOnce(t, e, id, 0, 3, 2)
	assertCommittedOnce(t, e, id, 1, 2, 1)
	for _, ref := range append(ranIDs(id, "a", 3), ranIDs(id, "b", 2)...) {
		if runs := rig.runCount(ref); runs != 1 {
			t.Errorf("task %s ran %d times, want once", ref, runs)
		}
	}
	if m := readManifest(t, e, js.Manifest); len(m.Outputs) != 2 {
		t.Errorf("manifest lists %d outputs, want stage b's 2", len(m.Outputs))
	}
}

// A stage whose input prefix holds no objects, allowed empty, has no
// tasks: it completes as soon as it is materialized (it used to stay
// RUNNING for ever, with the sweep re-checking it every CheckEvery), and
// the job goes on.
func TestEmptyInputStageCompletes(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	id := submitTo(t, rig.svc, "empty", `{"name":"empty","stages":[
	  {"name":"read","task":"work","partitions":{"input":{"prefix":"inputs:nothing-here/","allowEmpty":true}}},
	  {"name":"after","task":"work","after":["read"],"partitions":{"count":1}}]}`)
	if js := jobState(t, rig.svc, id); js.Stages[0].State != string(sm.StageCompleted) {
		t.Fatalf("empty stage is %s after submit, want COMPLETED: %+v", js.Stages[0].State, js)
	}
	if hs := work(t, rig.e, rig.exec); !slices.Equal(bodies(hs), taskIDs(id, 1, 1)) {
		t.Fatalf("handled %v, want the downstream task", bodies(hs))
	}
	js := wantSucceeded(t, rig.svc, id)
	if m := readManifest(t, rig.e, js.Manifest); len(m.Outputs) != 1 {
		t.Errorf("manifest lists %d outputs, want the downstream task's 1", len(m.Outputs))
	}
}
