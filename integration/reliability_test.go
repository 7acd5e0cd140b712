package integration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/split"
	"github.com/batchwork/batchwork/shared/tuning"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Tests for the defects of the reliability review (issue 15): each one
// fails without its fix.

// A dead executor's late commit meets a newer attempt that is still
// running. The token fence, not the terminal state, must refuse it: the
// answer is a stale claim and nothing of the task changes.
func TestLateCommitFencedByLiveNewerClaim(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	id := submitTo(t, rig.svc, "live", `{"name":"live","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`)
	ref := domain.TaskRef{Job: id}
	stale := mustClaim(t, rig.svc, ref)
	putOutput(t, e, stale, "stale\n")
	rig.clk.Advance(10*time.Second + sm.LeaseSkew + time.Second)
	fresh := mustClaim(t, rig.svc, ref)
	if fresh.Task.Attempt != 2 {
		t.Fatalf("takeover is attempt %d, want 2", fresh.Task.Attempt)
	}
	err := rig.svc.Commit(ctx, stale, control.CommitResult{Outputs: 1})
	if !errors.Is(err, domain.ErrStaleClaim) || errors.Is(err, domain.ErrAlreadyDone) {
		t.Fatalf("late commit against a live newer claim: got %v, want only ErrStaleClaim", err)
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskClaimed || task.Token != fresh.Task.Token || task.Attempt != 2 {
		t.Fatalf("task after the fenced commit: %s attempt %d; want CLAIMED by attempt 2", task.State, task.Attempt)
	}
	putOutput(t, e, fresh, "fresh\n")
	if err := rig.svc.Commit(ctx, fresh, control.CommitResult{Outputs: 1}); err != nil {
		t.Fatalf("commit of the live attempt: %v", err)
	}
	assertCommittedOnce(t, e, id, 0, 1, 2)
}

// orderSpy records, in one sequence, when a stage's manifest is written
// and when its stage completes, across the blob and the store.
type orderSpy struct {
	mu     sync.Mutex
	events []string
}

func (o *orderSpy) add(ev string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, ev)
}

func (o *orderSpy) index(ev string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, e := range o.events {
		if e == ev {
			return i
		}
	}
	return -1
}

type spyBlob struct {
	control.Blob
	spy *orderSpy
}

func (b *spyBlob) PutIfAbsent(ctx context.Context, key string, body []byte) error {
	err := b.Blob.PutIfAbsent(ctx, key, body)
	if err == nil {
		b.spy.add("put " + key)
	}
	return err
}

type spyStore struct {
	control.Store
	spy *orderSpy
}

func (s *spyStore) StageTransition(ctx context.Context, p dynamo.StageTransitionParams) error {
	err := s.Store.StageTransition(ctx, p)
	if err == nil {
		s.spy.add(fmt.Sprintf("%s stage %d", p.Event, p.Stage))
	}
	return err
}

// A stage that reads a shuffle and also waits on another upstream starts
// the moment both have completed. The shuffle's manifest, which its tasks
// read, is written after the shuffle stage completed (so only for a stage
// that completed while its job ran) and before any downstream stage
// starts; otherwise the other upstream's completion starts tasks that
// find no manifest.
func TestShuffleManifestBeforeDownstreamStarts(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e := rig.e
	spy := &orderSpy{}
	svc := newServiceWithBlob(e, testTimings, &spyStore{Store: e.r.Store, spy: spy}, &spyBlob{Blob: e.r.Blob, spy: spy}, rig.clk, rig.logs)
	exec := rig.executor(svc)
	id := submitTo(t, svc, "shuf", `{"name":"shuf","stages":[
		{"name":"map","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"side","task":"work","partitions":{"count":1}},
		{"name":"join","task":"work","after":["map","side"]}]}`)
	work(t, e, exec)
	wantSucceeded(t, svc, id)
	put := spy.index("put " + blob.StageManifestKey(id, "map"))
	done := spy.index("complete stage 0")
	start := spy.index("start stage 2")
	if put < 0 || done < 0 || start < 0 || put < done || put > start {
		t.Fatalf("shuffle manifest written at step %d, stage completed at step %d, downstream started at step %d (%v); want the manifest between them", put, done, start, spy.events)
	}
}

// flakyList fails the first n listings of an input prefix as S3 does when
// it throttles (after the SDK's own retries gave up).
type flakyList struct {
	control.Blob
	mu sync.Mutex
	n  int
}

func (f *flakyList) List(ctx context.Context, bucket, prefix string) ([]split.Object, error) {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, &smithy.GenericAPIError{Code: "SlowDown", Message: "Please reduce your request rate."})
	}
	return f.Blob.List(ctx, bucket, prefix)
}

// A throttled listing while planning an input stage is transient: the job
// stays RUNNING, the sweep plans the stage again, and the job succeeds.
// Bad input still fails the job at once.
func TestTransientPlanningErrorIsRetried(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e := rig.e
	e.putInput("tester", "in/a.txt", []byte("one\ntwo\n"))
	// The operator allows a bucket that does not exist.
	cfg := testTimings
	cfg.InputBuckets = []string{"no-such-bucket-here"}
	svc := newServiceWithBlob(e, cfg, e.r.Store, &flakyList{Blob: e.r.Blob, n: 1}, rig.clk, rig.logs)
	spec := `{"name":"plan","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"inputs:in/"}}}]}`
	id := submitTo(t, svc, "plan", spec)
	if js := jobState(t, svc, id); js.State != string(sm.JobRunning) {
		t.Fatalf("job after a throttled planning: %s (%s), want RUNNING", js.State, js.Error)
	}
	rig.clk.Advance(testTimings.StartGrace + time.Second)
	mustSweep(t, svc)
	work(t, e, rig.executor(svc))
	wantSucceeded(t, svc, id)

	bad := submitTo(t, svc, "nobucket", `{"name":"plan","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://no-such-bucket-here/in/"}}}]}`)
	if js := jobState(t, svc, bad); js.State != string(sm.JobFailed) {
		t.Fatalf("job over a missing bucket: %s, want FAILED", js.State)
	}
}

// A cancel ends the job; before its stages are cancelled (the canceller
// died in between), the last task of a stage commits. The stage must not
// complete, no downstream stage may start, and no job manifest appears.
func TestLateCommitAfterCancelMovesNoStage(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	id := submitTo(t, rig.svc, "cancel", `{"name":"cancel","stages":[
		{"name":"a","task":"work","partitions":{"count":1}},
		{"name":"b","task":"work","after":["a"],"partitions":{"count":1}}]}`)
	c := mustClaim(t, rig.svc, domain.TaskRef{Job: id})
	putOutput(t, e, c, "late\n")
	// The cancel's first write, and nothing after it.
	if err := e.r.Store.JobEnd(ctx, id, sm.JobCancel, "cancelled by tester", "", rig.clk.Now()); err != nil {
		t.Fatal(err)
	}
	_ = rig.svc.Commit(ctx, c, control.CommitResult{Outputs: 1}) // a commit may land; what follows it must not
	stages, err := e.r.Store.StageList(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if stages[0].State == sm.StageCompleted || stages[1].State != sm.StageBlocked {
		t.Fatalf("after a late commit of a cancelled job: stage a %s, b %s; want a not COMPLETED, b BLOCKED", stages[0].State, stages[1].State)
	}
	if _, err := e.r.Blob.Get(ctx, blob.JobManifestKey(id)); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("job manifest of a cancelled job: %v, want not found", err)
	}
	// The sweep finishes the cancel.
	rig.clk.Advance(time.Hour)
	mustSweep(t, rig.svc)
	stages, err = e.r.Store.StageList(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range stages {
		if st.State != sm.StageCancelled {
			t.Errorf("stage %s is %s after the sweep, want CANCELLED", st.Name, st.State)
		}
	}
}

// expireHook runs fn right after the sweep's expire transition of a task
// has applied, before the sweep frees the expired attempt's slot.
type expireHook struct {
	control.Store
	once sync.Once
	fn   func()
}

func (h *expireHook) TaskSweep(ctx context.Context, p dynamo.SweepTaskParams) error {
	err := h.Store.TaskSweep(ctx, p)
	if err == nil && p.Event == sm.TaskExpire {
		h.once.Do(h.fn)
	}
	return err
}

// The sweep expires attempt 1 of a task under maxConcurrency 1, and
// attempt 2 is claimed before the sweep frees attempt 1's slot. Attempt 2
// took the slot over, so the sweep's release must leave it: the running
// attempt keeps its slot, and no second task can run beside it.
func TestExpiredAttemptDoesNotFreeNewAttemptsSlot(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	id := submitTo(t, rig.svc, "slots", `{"name":"slots","lease":"10s","maxConcurrency":1,"stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`)
	ref0, ref1 := domain.TaskRef{Job: id, Partition: 0}, domain.TaskRef{Job: id, Partition: 1}
	first := mustClaim(t, rig.svc, ref0)
	rig.clk.Advance(2*10*time.Second + sm.LeaseSkew + time.Second) // past the lease and its grace
	var second control.Claim
	hook := &expireHook{Store: e.r.Store, fn: func() { second = mustClaim(t, rig.svc, ref0) }}
	sweeper := rig.service(hook, e.r.Queue)
	if c := mustSweep(t, sweeper); c.Expired != 1 {
		t.Fatalf("sweep expired %d, want 1: %+v", c.Expired, c)
	}
	if second.Task.Attempt != first.Task.Attempt+1 {
		t.Fatalf("claim during the sweep: attempt %d, want %d", second.Task.Attempt, first.Task.Attempt+1)
	}
	holders, err := e.r.Store.SlotHolders(ctx, dynamo.JobSlots(id))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := holders[ref0]; !ok || len(holders) != 1 {
		t.Fatalf("slots after the sweep: %v; want the running attempt 2 to hold the only slot", holders)
	}
	if _, err := rig.svc.Claim(ctx, ref1); !errors.Is(err, control.ErrOverLimit) {
		t.Fatalf("claim of a second task beside the running one: %v, want ErrOverLimit", err)
	}
}

// The sweep that completes a stage takes it out of its index for good; a
// stale materializer that marks a finished stage materialized must not
// put it back.
func TestCompletedStageLeavesTheSweepIndex(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	crash := &crasher{op: "TaskCommit", n: 1}
	dying := rig.service(&faultStore{Store: e.r.Store, c: crash}, e.r.Queue)
	id := submitTo(t, rig.svc, "idx", oneStage("idx", "work", 1))
	c := mustClaim(t, dying, domain.TaskRef{Job: id})
	putOutput(t, e, c, "x\n")
	if err := dying.Commit(ctx, c, control.CommitResult{Outputs: 1}); !errors.Is(err, errCrash) {
		t.Fatalf("commit: %v, want the injected crash", err)
	}
	rig.clk.Advance(testTimings.CheckEvery + time.Second)
	mustSweep(t, rig.svc) // completes the stage and the job
	wantSucceeded(t, rig.svc, id)
	rig.clk.Advance(time.Hour)
	if c := mustSweep(t, rig.svc); c.Examined != 0 {
		t.Fatalf("a later sweep examined %d records of a finished job, want 0: %+v", c.Examined, c)
	}
	if err := e.r.Store.StageMarkMaterialized(ctx, id, 0, rig.clk.Now()); !errors.Is(err, sm.ErrInvalidTransition) {
		t.Fatalf("mark a completed stage materialized: %v, want ErrInvalidTransition", err)
	}
	if c := mustSweep(t, rig.svc); c.Examined != 0 {
		t.Fatalf("after a stale mark, a sweep examined %d records, want 0", c.Examined)
	}
}

// jobStateFails fails the first JobState read, as a throttled or reset
// request does after the SDK's retries.
type jobStateFails struct {
	control.Store
	once sync.Once
}

func (j *jobStateFails) JobState(ctx context.Context, id string) (sm.JobState, error) {
	fail := false
	j.once.Do(func() { fail = true })
	if fail {
		return "", fmt.Errorf("read job %s status: %w", id, &smithy.GenericAPIError{Code: "ThrottlingException"})
	}
	return j.Store.JobState(ctx, id)
}

// A transient error on the job-state read right after a claim must not
// strand the claim: the read is tried again and the claim is granted.
func TestClaimSurvivesTransientJobStateError(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	id := submitTo(t, rig.svc, "js", oneStage("js", "work", 1))
	svc := rig.service(&jobStateFails{Store: rig.e.r.Store}, rig.e.r.Queue)
	c := mustClaim(t, svc, domain.TaskRef{Job: id})
	if c.Task.Attempt != 1 {
		t.Fatalf("claim attempt %d, want 1", c.Task.Attempt)
	}
}

// The runner can be the control plane alone, with executors elsewhere:
// its own registry has no task functions, so had it run executor slots,
// they would claim the task and fail it; the job succeeds only through
// the separate executor.
func TestControlPlaneWithoutExecutors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{controlOnly: true})
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := t.Out.Write([]byte("ok\n"))
		return err
	})
	id := e.submit("split", []byte(`{"name":"split","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"work","partitions":{"count":3}}]}`))
	p := e.r.Poller()
	p.Handler = &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: e.r.Executor.Log}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED through the separate executor", st.State, st.Error)
	}
}

// An executor dies (no more liveness renewals, its message hidden for
// only a few seconds) while its task's lease has most of a minute to run.
// A healthy executor takes the task over as attempt 2 while attempt 1's
// lease is still live: recovery waits for the dead executor's liveness
// promise, not for the task's lease.
func TestDeadExecutorsTaskIsTakenOver(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		_, err := t.Out.Write([]byte("ok\n"))
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("dead", []byte(`{"name":"dead","lease":"60s","stages":[{"name":"s","task":"work","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id}

	// The executor that dies: alive once, receives the message with the
	// held visibility, claims, and is never heard of again.
	const dead = "deadbeefdeadbeef"
	if err := e.r.Service.ExecutorAlive(ctx, dead); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.r.Queue.Receive(ctx, e.r.Resources.Queues.Normal, 1, 2*time.Second, tuning.HeldVisibility)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("receive: %v %v", msgs, err)
	}
	first, err := e.r.Service.Claim(control.WithExecutor(ctx, dead), ref)
	if err != nil {
		t.Fatal(err)
	}

	claims := make(chan control.Claim, 4)
	p := e.r.Poller()
	p.Handler = &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: e.r.Executor.Log,
		OnClaim: func(c control.Claim, _ time.Time) { claims <- c }}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })

	second := recvWithin(t, claims, time.Minute, "the takeover's claim")
	if second.Task.Attempt != 2 || second.Task.Executor == dead {
		t.Fatalf("takeover: attempt %d by executor %q, want attempt 2 by another executor", second.Task.Attempt, second.Task.Executor)
	}
	if at := second.Task.LeaseUntil.Add(-second.Lease); !at.Before(first.Task.LeaseUntil) {
		t.Fatalf("attempt 2 claimed at %s, after attempt 1's lease ended at %s: a lease expiry, not a takeover", at, first.Task.LeaseUntil)
	}
	if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s (%s), want SUCCEEDED", st.State, st.Error)
	}
	assertCommittedOnce(t, e, id, 0, 1, 2)
	if err := e.r.Service.Commit(ctx, first, control.CommitResult{Outputs: 0}); !errors.Is(err, domain.ErrAlreadyDone) && !errors.Is(err, domain.ErrStaleClaim) {
		t.Fatalf("the dead executor's late commit: %v, want it fenced", err)
	}
}

// A copy of a message whose task runs on a live executor is held back,
// and the task stays with its executor.
func TestLiveExecutorsTaskIsNotTakenOver(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	id := submitTo(t, rig.svc, "live", oneStage("live", "work", 1))
	const alive = "a11ve0000000a11e"
	if err := rig.svc.ExecutorAlive(ctx, alive); err != nil {
		t.Fatal(err)
	}
	first, err := rig.svc.Claim(control.WithExecutor(ctx, alive), domain.TaskRef{Job: id})
	if err != nil {
		t.Fatal(err)
	}
	rig.clk.Advance(tuning.ExecutorLease / 2) // within the promise
	_, err = rig.svc.Claim(control.WithExecutor(ctx, "0ther0000000000e"), domain.TaskRef{Job: id})
	var held *domain.ClaimHeldError
	if !errors.As(err, &held) {
		t.Fatalf("claim of a live executor's task: %v, want ClaimHeldError", err)
	}
	task, err := rig.e.r.Store.TaskGet(ctx, first.Task.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.Token != first.Task.Token || task.Executor != alive {
		t.Fatalf("task moved to executor %q attempt %d, want it kept by %q", task.Executor, task.Attempt, alive)
	}
	// Once the promise has lapsed (and the skew margin), it is taken over.
	rig.clk.Advance(tuning.ExecutorLease + sm.LeaseSkew)
	second, err := rig.svc.Claim(control.WithExecutor(ctx, "0ther0000000000e"), domain.TaskRef{Job: id})
	if err != nil || second.Task.Attempt != 2 {
		t.Fatalf("claim after the promise lapsed: attempt %d, %v; want attempt 2", second.Task.Attempt, err)
	}
}

// A claim without an executor id (a remote executor through the claim
// function) that takes over a dead executor's task clears the dead id
// from the record.
func TestClaimWithoutExecutorClearsDeadHolder(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	ctx := context.Background()
	id := submitTo(t, rig.svc, "clear", oneStage("clear", "work", 1))
	if _, err := rig.svc.Claim(control.WithExecutor(ctx, "deadbeefdeadbeef"), domain.TaskRef{Job: id}); err != nil {
		t.Fatal(err)
	}
	rig.clk.Advance(tuning.ExecutorLease + sm.LeaseSkew + time.Second)
	c, err := rig.svc.Claim(ctx, domain.TaskRef{Job: id})
	if err != nil || c.Task.Attempt != 2 {
		t.Fatalf("takeover without an executor id: attempt %d, %v", c.Task.Attempt, err)
	}
	task, err := rig.e.r.Store.TaskGet(ctx, c.Task.Ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.Executor != "" || task.Token != c.Task.Token {
		t.Fatalf("record after the takeover: executor %q; want none", task.Executor)
	}
}

// Dead letters that name no task stay for an operator, but must not crowd
// out the ones that do: one sweep reads past a dozen of them and sends a
// live task's message back.
func TestDeadLettersNamingNoTaskDoNotCrowdOut(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ctx := rig.e, context.Background()
	id := submitTo(t, rig.svc, "dlq", oneStage("dlq", "work", 1))
	ready, dlq := e.r.Resources.Queues.Normal, e.r.Resources.Queues.DLQ
	for _, m := range receiveVisible(t, e, ready) { // the task's message is lost...
		if err := e.r.Queue.DeleteBatch(ctx, ready, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}
	var junk []queue.Send
	for i := range 12 {
		junk = append(junk, queue.Send{Body: fmt.Sprintf("not a task %d", i)})
	}
	if err := e.r.Queue.SendBatch(ctx, dlq, junk); err != nil {
		t.Fatal(err)
	}
	// ...and a copy of it sits in the dead-letter queue behind the junk.
	if err := e.r.Queue.SendBatch(ctx, dlq, []queue.Send{{Body: domain.TaskRef{Job: id}.String()}}); err != nil {
		t.Fatal(err)
	}
	if c := mustSweep(t, rig.svc); c.DeadLettered != 1 {
		t.Fatalf("sweep handled %d dead letters, want the task's 1: %+v", c.DeadLettered, c)
	}
	if got := bodies(handledAll(receiveVisible(t, e, ready))); len(got) != 1 || got[0] != (domain.TaskRef{Job: id}).String() {
		t.Fatalf("ready queue after the sweep: %v, want the task's message", got)
	}
}

func handledAll(ms []queue.Message) []handled {
	var hs []handled
	for _, m := range ms {
		hs = append(hs, handled{Body: m.Body})
	}
	return hs
}
