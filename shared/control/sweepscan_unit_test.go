package control

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A sweep run reads a small index whole, in one request, and walks the
// shards only when the index holds SweepLimit entries or more, or the
// whole read failed (a warning, not the run's error); either way every
// expired claim is found. A whole read that answered its records and an
// error beside them (a record it could not read) handles those records
// and reports the error as the run's, as the walk does with a shard's.
func TestSweepReadsASmallIndexWhole(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		limit     int
		tasks     int
		scanFails bool
		// recordFails: the whole read answers, with an error beside its
		// records.
		recordFails bool
		wantLists   int
	}{
		{name: "a small index: one read", limit: 50, tasks: 3, wantLists: 0},
		{name: "an index of the limit: the walk", limit: 3, tasks: 3, wantLists: dynamo.DueShards},
		{name: "a failed read: the walk", limit: 50, tasks: 3, scanFails: true, wantLists: dynamo.DueShards},
		{name: "a whole read with a record it could not read: the run's error", limit: 50, tasks: 3, recordFails: true, wantLists: 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.SweepLimit = c.limit })
			job := r.submit(oneStage(c.tasks, 3, ""))
			for p := range c.tasks {
				r.claim(taskRef(job, 0, p))
			}
			r.queue.Drain()
			r.clock.Advance(2 * unitLease)
			unread := errors.New("a record that could not be read")
			r.store.SetFaults(func(method string) error {
				switch {
				case method == "DueScan" && c.scanFails:
					return errors.New("throttled")
				case method == "DueScanRecords" && c.recordFails:
					return unread
				}
				return nil
			}, nil)
			scans, lists := r.store.CallCount("DueScan"), r.store.CallCount("DueList")
			// A failed whole read is a warning: the walk covers the index.
			counts, err := r.svc.Sweep(r.ctx)
			if c.recordFails {
				if !errors.Is(err, unread) {
					t.Errorf("sweep error %v, want the record's", err)
				}
			} else if err != nil {
				t.Fatalf("sweep: %v", err)
			}
			if n := r.store.CallCount("DueScan") - scans; n != 1 {
				t.Errorf("%d whole reads, want 1", n)
			}
			if n := r.store.CallCount("DueList") - lists; n != c.wantLists {
				t.Errorf("%d shard reads, want %d", n, c.wantLists)
			}
			if counts.Expired != c.tasks {
				t.Errorf("sweep counts %+v, want %d expired", counts, c.tasks)
			}
			for p := range c.tasks {
				if got := r.task(taskRef(job, 0, p)); got.State != sm.TaskReady {
					t.Errorf("task %d %s, want READY after its expiry", p, got.State)
				}
			}
		})
	}
}
