package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A stage is materialized a bounded chunk at a time: the call that starts
// it writes and sends one chunk, and each sweep run carries on from the
// recorded count, until every task exists exactly once. Nothing consumes
// the timer queue here, so the relays each call leaves there
// (relay_test.go) are lost, and the sweep is the safety net: it
// steps in a StartGrace after the last chunk recorded.
func TestMaterializationInChunks(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(context.Context, *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, control: &control.Config{
		StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: time.Minute,
		ChunkTasks: 10, ChunksPerCall: 1,
	}})
	ctx := context.Background()
	id := e.submit("chunks", []byte(`{"name":"chunks","stages":[{"name":"a","task":"noop","partitions":{"count":25}}]}`))

	for i, want := range []struct {
		enqueued     int
		materialized bool
	}{{10, false}, {20, false}, {25, true}} {
		if i > 0 {
			time.Sleep(time.Second + 100*time.Millisecond) // StartGrace
			if _, err := e.r.Service.Sweep(ctx); err != nil {
				t.Fatalf("sweep %d: %v", i, err)
			}
		}
		st, err := e.r.Store.StageGet(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Enqueued != want.enqueued || st.Materialized != want.materialized {
			t.Fatalf("after %d sweeps: enqueued %d materialized %v, want %d %v", i, st.Enqueued, st.Materialized, want.enqueued, want.materialized)
		}
		if n := queueDepth(t, e, e.r.Resources.Queues.Normal); n != want.enqueued {
			t.Fatalf("after %d sweeps: %d messages queued, want %d", i, n, want.enqueued)
		}
	}
	wantTasksOnce(t, e, id, 25)
	for _, tk := range stageTasks(t, e, id, 0) {
		if tk.State != sm.TaskReady {
			t.Fatalf("task %s: state %s, want READY", tk.Ref, tk.State)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.r.Poller().Run(runCtx) }()
	defer func() { stop(); <-done }()
	if st := e.waitJob(id, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED: %+v", st.State, st)
	}
}

// queueDepth reads a queue's visible message count (exact on the emulator).
func queueDepth(t *testing.T, e *env, url string) int {
	t.Helper()
	out, err := sqs.NewFromConfig(e.cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	var n int
	if _, err := fmt.Sscan(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)], &n); err != nil {
		t.Fatalf("queue depth: %v", err)
	}
	return n
}

// Only the commit that empties the stage's last counter completes the stage
// (no sweep runs here), and each earlier commit leaves it running.
func TestLastCommitCompletesStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	ctx := context.Background()
	id := e.submit("last", []byte(`{"name":"last","stages":[{"name":"s","task":"x","partitions":{"count":3}}]}`))
	for p, want := range []sm.StageState{sm.StageRunning, sm.StageRunning, sm.StageCompleted} {
		c := mustClaim(t, e.r.Service, domain.TaskRef{Job: id, Stage: 0, Partition: p})
		putOutput(t, e, c, "out\n")
		// Twice: a retried commit must neither count again nor miss the
		// completion its first try may have won.
		for try := 0; try < 2; try++ {
			if err := e.r.Service.Commit(ctx, c, control.CommitResult{Outputs: 1}); err != nil {
				t.Fatalf("commit %d try %d: %v", p, try, err)
			}
		}
		st, err := e.r.Store.StageGet(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.State != want {
			t.Fatalf("after commit %d: stage %s, want %s", p, st.State, want)
		}
	}
	if js := e.waitJob(id, time.Second); js.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s, want SUCCEEDED", js.State)
	}
}

// markHook runs hook just before the stage is marked materialized.
type markHook struct {
	control.Store
	hook func()
}

func (m *markHook) StageMarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error {
	m.hook()
	return m.Store.StageMarkMaterialized(ctx, job, idx, due)
}

// Fast tasks can all commit between their messages going out and their
// stage being marked materialized; their committers cannot complete the
// stage then, so the materializer must, without waiting for the sweep.
func TestTasksCommittedBeforeMarkCompleteStage(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, control.Config{StartGrace: time.Hour, CheckEvery: time.Hour, StuckAfter: time.Hour})
	ran := 0
	store := &markHook{Store: rig.e.r.Store, hook: func() { ran += len(work(t, rig.e, rig.exec)) }}
	id := submitTo(t, rig.service(store, rig.e.r.Queue), "fast", oneStage("fast", "work", 3))
	if ran != 3 {
		t.Fatalf("%d tasks ran before the mark, want 3", ran)
	}
	wantSucceeded(t, rig.svc, id)
}

// A task that stays READY is looked at again after as long as it has
// already waited, so one stuck behind a long backlog is resent at
// StuckAfter, then at 2, 4 and 8 times it, not every StuckAfter.
func TestSweepResendsWaitingTaskLessOften(t *testing.T) {
	t.Parallel()
	stuck := 10 * time.Second
	rig := newSweepRig(t, control.Config{StartGrace: time.Second, CheckEvery: time.Hour, StuckAfter: stuck})
	e, ready := rig.e, rig.e.r.Resources.Queues.Normal
	submitTo(t, rig.svc, "waiting", oneStage("waiting", "work", 1))
	drain := func() int {
		msgs := receiveVisible(t, e, ready)
		for _, m := range msgs {
			if err := e.r.Queue.DeleteBatch(context.Background(), ready, []string{m.Receipt}); err != nil {
				t.Fatal(err)
			}
		}
		return len(msgs)
	}
	drain() // the message never reaches an executor
	var resentAt []time.Duration
	for age := time.Duration(0); age <= 9*stuck; age += stuck / 2 {
		if c := mustSweep(t, rig.svc); c.Requeued > 0 {
			resentAt = append(resentAt, age)
			if n := drain(); n != c.Requeued {
				t.Fatalf("at %s: %d messages for %d requeued", age, n, c.Requeued)
			}
		}
		rig.clk.Advance(stuck / 2)
	}
	// Linear resending would give 10s, 20s, 30s, ... 90s.
	want := []time.Duration{stuck, 2 * stuck, 4 * stuck, 8 * stuck}
	if !slices.Equal(resentAt, want) {
		t.Fatalf("resent at %v, want %v", resentAt, want)
	}
}

// slowChunks stands for a slow materialization: writing a chunk's tasks
// takes slow (on the test clock), and after records each recorded chunk.
type slowChunks struct {
	control.Store
	clk   *testClock
	slow  time.Duration
	after func(to int)
}

func (a *slowChunks) TaskPutMany(ctx context.Context, tasks []domain.Task, due time.Time) error {
	a.clk.Advance(a.slow)
	return a.Store.TaskPutMany(ctx, tasks, due)
}

func (a *slowChunks) StageAdvanceEnqueued(ctx context.Context, job string, idx, from, to int, due time.Time) (bool, error) {
	ok, err := a.Store.StageAdvanceEnqueued(ctx, job, idx, from, to, due)
	a.after(to)
	return ok, err
}

// A materialization that is slow but making progress keeps pushing its
// stage's sweep check back, so the sweep does not start a second one
// alongside (which would repeat puts and send duplicate messages).
func TestSweepLeavesProgressingMaterializationAlone(t *testing.T) {
	t.Parallel()
	grace := 10 * time.Second
	rig := newSweepRig(t, control.Config{StartGrace: grace, CheckEvery: time.Hour, StuckAfter: time.Hour, ChunkTasks: 5})
	var counts []control.SweepCounts
	// Each chunk takes most of the grace period, and the sweep looks in
	// after the first, past the stage's first due time (start + grace).
	store := &slowChunks{Store: rig.e.r.Store, clk: rig.clk, slow: grace - time.Second, after: func(to int) {
		if to == 5 {
			rig.clk.Advance(5 * time.Second)
			counts = append(counts, mustSweep(t, rig.svc))
		}
	}}
	id := submitTo(t, rig.service(store, rig.e.r.Queue), "slow", oneStage("slow", "work", 10))
	if len(counts) != 1 {
		t.Fatalf("%d sweeps ran during the materialization, want 1", len(counts))
	}
	for i, c := range counts {
		if c.StagesFixed != 0 {
			t.Fatalf("sweep %d stepped into a live materialization: %+v", i, c)
		}
	}
	if n := messagesIn(t, rig.e, rig.e.r.Resources.Queues.Normal); n != 10 {
		t.Fatalf("%d messages queued, want one per task (10)", n)
	}
	work(t, rig.e, rig.exec)
	wantSucceeded(t, rig.svc, id)
}
