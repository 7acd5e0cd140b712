package control

import (
	"testing"

	sm "github.com/batchwork/batchwork/statemachine"
)

// Without a timer queue (the api and commit functions on AWS), the
// caller queues SegmentWorkers segments at once and leaves the others to
// the next sweep, due at once rather than a grace after its last chunk;
// the sweep queues them, every task with one message, and the stage
// completes.
func TestMaterializeInSegmentsWithoutTimerQueue(t *testing.T) {
	t.Parallel()
	const n = 15 // segments 0-3, 4-7, 8-11, 12-14
	r := newUnitRig(t, func(cfg *Config) {
		cfg.ChunkTasks, cfg.ChunksPerCall = 2, 5
		cfg.SegmentTasks, cfg.SegmentWorkers = 4, 2
	})
	if r.svc.cfg.Queues.Timer != "" {
		t.Fatal("the unit rig has a timer queue")
	}
	job := r.submit(oneStage(n, 3, ""))
	st := r.stage(job, 0)
	if st.SegmentCount() != 4 || !st.SegmentDone(0) || !st.SegmentDone(1) || st.SegmentDone(2) || st.SegmentDone(3) || st.Materialized {
		t.Fatalf("after the submit: %+v, want segments 0 and 1 of 4 sent", st)
	}
	if due := r.store.DueOf(stageItem(job, 0)); due.IsZero() || due.After(r.clock.Now()) {
		t.Fatalf("stage due %v, want now (%v): its other segments are the next sweep's", due, r.clock.Now())
	}
	if _, err := r.svc.Sweep(r.ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if st := r.stage(job, 0); !st.Materialized || st.Enqueued != n {
		t.Fatalf("after the sweep: %+v, want materialized", st)
	}
	msgs := r.queue.Drain()
	counts := bodyCounts(msgs)
	if len(msgs) != n || len(counts) != n {
		t.Fatalf("%d messages for %d tasks, want one each of %d: %v", len(msgs), len(counts), n, counts)
	}
	for p := range n {
		r.commit(r.claim(taskRef(job, 0, p)), 0)
	}
	r.wantState(taskRef(job, 0, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
}
