package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// noAdvance stands for a materializer that died after sending a chunk's
// messages and before recording the chunk as enqueued.
type noAdvance struct{ control.Store }

func (noAdvance) StageAdvanceEnqueued(context.Context, string, int, int, int, time.Time) (bool, error) {
	return false, errors.New("injected crash after the send")
}

// A chunk whose send was never confirmed may have lost its messages before
// SQS took them: its READY tasks are resent at StuckAfter, as a chunk's
// always were (tasks of a confirmed send wait SentWait:
// TestSweepResendsLostMessage).
func TestSweepResendsUnconfirmedChunkAtStuckAfter(t *testing.T) {
	t.Parallel()
	// StartGrace past StuckAfter: the sweep's repeat of the stalled
	// materialization, which would send the chunk again, comes later.
	cfg := control.Config{StartGrace: time.Hour, CheckEvery: time.Hour, StuckAfter: 5 * time.Second}
	rig := newSweepRig(t, cfg)
	e, ready := rig.e, rig.e.r.Resources.Queues.Normal
	ctx := context.Background()
	if _, err := rig.service(noAdvance{rig.e.r.Store}, rig.e.r.Queue).Submit(ctx, control.SubmitRequest{
		Owner: "tester", IdempotencyKey: "unconfirmed", Spec: []byte(oneStage("unconfirmed", "work", 3)),
	}); err != nil {
		t.Logf("submit: %v (the materialization's crash; the job is recorded)", err)
	}
	lost := receiveVisible(t, e, ready)
	if len(lost) != 3 {
		t.Fatalf("%d messages after submit, want 3", len(lost))
	}
	for _, m := range lost {
		if err := e.r.Queue.DeleteBatch(ctx, ready, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}
	if c := mustSweep(t, rig.svc); c.Requeued != 0 {
		t.Fatalf("sweep before StuckAfter requeued %d tasks: %+v", c.Requeued, c)
	}
	rig.clk.Advance(cfg.StuckAfter + time.Second)
	if c := mustSweep(t, rig.svc); c.Requeued != 3 {
		t.Fatalf("sweep after StuckAfter requeued %d tasks of the unconfirmed chunk, want 3: %+v", c.Requeued, c)
	}
	if n := messagesIn(t, e, ready); n != 3 {
		t.Fatalf("%d messages after the sweep, want 3", n)
	}
}

// READY tasks of a job that ended are cancelled at their chunk's first
// look, confirmed send or not: waiting for SentWait is only for the tasks
// of running jobs.
func TestSweepCancelsQueuedTasksOfEndedJobAtFirstLook(t *testing.T) {
	t.Parallel()
	rig := newSweepRig(t, testTimings)
	e, ready := rig.e, rig.e.r.Resources.Queues.Normal
	ctx := context.Background()
	id := submitTo(t, rig.svc, "ended", oneStage("ended", "work", 3))
	// The messages go (as a drained queue would): only the sweep can end
	// the tasks.
	for _, m := range receiveVisible(t, e, ready) {
		if err := e.r.Queue.DeleteBatch(ctx, ready, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rig.svc.Cancel(ctx, "tester", id); err != nil {
		t.Fatal(err)
	}
	rig.clk.Advance(testTimings.StuckAfter + time.Second)
	mustSweep(t, rig.svc)
	for p := range 3 {
		task := getTask(t, rig, domain.TaskRef{Job: id, Partition: p})
		if task.State != sm.TaskCancelled {
			t.Fatalf("task %d of the cancelled job is %s after its chunk's first look, want CANCELLED", p, task.State)
		}
	}
}
