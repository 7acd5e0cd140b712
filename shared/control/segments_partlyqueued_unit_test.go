package control

import (
	"testing"
	"time"
)

// A stage being queued by one chain when the segments arrive (a stack
// deployed with this change, whose default SegmentTasks is 10,000, while
// a stage of more is part way: Enqueued = E, no segments) is split by
// the first sweep that materializes it (a stall: its relay lost or its
// process gone), and StageSetSegments started every segment k >= 1 at its
// first partition k*size, although the one chain had sent up to E. The
// segments below E were queued again: each of their tasks got a second
// message (and, until the chains pass E again, Sent(p) says false for
// tasks that were sent). Each chunk is meant to be written and sent once.
func TestStagePartlyQueuedBeforeSegmentsIsNotSentAgain(t *testing.T) {
	t.Parallel()
	const n = 15
	r := newUnitRig(t, func(cfg *Config) {
		cfg.ChunkTasks, cfg.ChunksPerCall = 2, 5
		cfg.SegmentTasks, cfg.SegmentWorkers = 1000, 2 // one chain, as before segments
	})
	job := r.submit(oneStage(n, 3, ""))
	if st := r.stage(job, 0); st.Enqueued != 10 || st.SegmentCount() != 1 {
		t.Fatalf("after the submit: %+v, want 10 of 15 queued by one chain", st)
	}
	// The new code, with segments of 4, takes over (the rig's Service
	// is rebuilt over the same store and queue).
	cfg := unitTimings
	cfg.ChunkTasks, cfg.ChunksPerCall = 2, 5
	cfg.SegmentTasks, cfg.SegmentWorkers = 4, 2
	svc := New(cfg, r.store, r.queue, r.blob, testLogger(t))
	svc.Now, svc.Jitter, svc.Sleep = r.clock.Now, func(time.Duration) time.Duration { return 0 }, r.sleep
	r.svc = svc
	first := bodyCounts(r.queue.Drain())
	if _, err := r.svc.Sweep(r.ctx); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	st := r.stage(job, 0)
	var again []string
	for b := range bodyCounts(r.queue.Drain()) {
		if first[b] > 0 {
			again = append(again, b)
		}
	}
	if len(again) > 0 {
		t.Errorf("the sweep that split the stage (now %+v) sent %d of the tasks the one chain had sent again: %v", st, len(again), again)
	}
}
