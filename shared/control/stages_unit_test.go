package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
	"github.com/google/go-cmp/cmp"
)

// Materialization in chunks, resumed by the sweep after a partial call or
// a fault: every task exists once and has a message (duplicates allowed,
// counted), none is missing, and none is reset.
func TestMaterialize(t *testing.T) {
	t.Parallel()
	const n = 7
	cases := []struct {
		name                      string
		storeBefore, storeAfter   testdouble.Hook
		queueBefore               testdouble.Hook
		claimBetween              bool // claim a task of the faulty chunk before it is repeated
		wantDuplicates, maxSweeps int
	}{
		{name: "no faults: one chunk per call, the sweep does the rest", maxSweeps: 3},
		{name: "the count's write fails: the chunk is sent again", storeBefore: testdouble.FailOnce("StageAdvanceEnqueued"), wantDuplicates: 2, maxSweeps: 4},
		{name: "the count's response is lost: the next chunk waits a grace", storeAfter: testdouble.FailOnce("StageAdvanceEnqueued"), maxSweeps: 5},
		{name: "the task write fails: the chunk is written again", storeBefore: testdouble.FailOnce("TaskPutMany"), maxSweeps: 4},
		{name: "the send fails: the chunk is sent again", queueBefore: testdouble.FailOnce("SendBatch"), maxSweeps: 4},
		{name: "a repeated chunk does not reset a task claimed meanwhile", storeBefore: testdouble.FailOnce("StageAdvanceEnqueued"), claimBetween: true, wantDuplicates: 2, maxSweeps: 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) {
				cfg.ChunkTasks, cfg.ChunksPerCall = 2, 1
				cfg.SegmentTasks = n       // one chain (TestMaterializeInSegments: several)
				cfg.StuckAfter = time.Hour // no resends of READY tasks to muddle the count
			})
			job := r.submit(oneStage(n, 3, ""))
			st := r.stage(job, 0)
			if st.State != sm.StageRunning || st.Materialized || st.Total != n || st.Enqueued != 2 {
				t.Fatalf("after the submit's one chunk: %+v", st)
			}
			if due := r.store.DueOf(stageItem(job, 0)); due.IsZero() || due.After(r.clock.Now()) {
				t.Fatalf("partly materialized stage due %v, want now (%v)", due, r.clock.Now())
			}
			r.store.SetFaults(c.storeBefore, c.storeAfter)
			r.queue.SetFault(c.queueBefore)
			var claimed *Claim
			sweeps := 0
			for ; !r.stage(job, 0).Materialized; sweeps++ {
				if sweeps == 10 {
					t.Fatalf("not materialized after %d sweeps: %+v", sweeps, r.stage(job, 0))
				}
				if r.store.DueOf(stageItem(job, 0)).After(r.clock.Now()) {
					// A chunk was recorded: the sweep waits a grace before
					// it suspects the materializer.
					r.clock.Advance(unitTimings.StartGrace)
				}
				if _, err := r.svc.Sweep(r.ctx); err != nil && !errors.Is(err, testdouble.ErrInjected) {
					t.Fatalf("sweep: %v", err)
				}
				if c.claimBetween && claimed == nil {
					cl := r.claim(taskRef(job, 0, 2))
					claimed = &cl
				}
			}
			if sweeps > c.maxSweeps {
				t.Errorf("%d sweeps to materialize, want at most %d", sweeps, c.maxSweeps)
			}
			if st := r.stage(job, 0); st.Enqueued != n || st.Total != n {
				t.Errorf("materialized stage %+v", st)
			}
			tasks, err := r.store.TaskListStage(r.ctx, job, 0, n)
			if err != nil || len(tasks) != n {
				t.Fatalf("%d tasks (%v), want %d", len(tasks), err, n)
			}
			for p, task := range tasks {
				want := sm.TaskReady
				if claimed != nil && p == claimed.Task.Ref.Partition {
					want = sm.TaskClaimed
					if task.Token != claimed.Task.Token || task.Attempt != 1 {
						t.Errorf("claimed task reset by the repeated chunk: %+v", task)
					}
				}
				if task.Ref.Partition != p || task.State != want {
					t.Errorf("task %d: %s %s, want partition %d %s", p, task.Ref, task.State, p, want)
				}
			}
			msgs := r.queue.Drain()
			counts := bodyCounts(msgs)
			for p := range n {
				if counts[taskRef(job, 0, p).String()] == 0 {
					t.Errorf("task %d has no message", p)
				}
			}
			if dup := len(msgs) - n; len(counts) != n || dup != c.wantDuplicates {
				t.Errorf("%d messages for %d tasks (%d duplicates), want %d duplicates: %v", len(msgs), len(counts), dup, c.wantDuplicates, counts)
			}
			// The materialized stage completes once its tasks commit.
			if claimed != nil {
				r.commit(*claimed, 0)
			}
			for p := range n {
				if claimed == nil || p != claimed.Task.Ref.Partition {
					r.commit(r.claim(taskRef(job, 0, p)), 0)
				}
			}
			r.wantState(taskRef(job, 0, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
		})
	}
}

// An S3-input stage plans its splits once, immutably, and fails its job
// on input it cannot use.
func TestMaterializeInput(t *testing.T) {
	t.Parallel()
	const inputSpec = `{"name":"unit","lease":"10s","stages":[{"name":"s","task":"work","partitions":{"input":{"prefix":"s3://in-bucket/data/","splitSize":4096}}}]}`
	cases := []struct {
		name    string
		objects map[string]int // key -> size, in bucket "in-bucket"
		spec    string         // "" for inputSpec
		check   func(t *testing.T, r *unitRig, job string)
	}{{
		name:    "objects are split into tasks, and the plan is kept",
		objects: map[string]int{"data/a": 4096, "data/b": 2*4096 + 1, "other/c": 10},
		check: func(t *testing.T, r *unitRig, job string) {
			want := split.Plan([]split.Object{{Key: "data/a", Size: 4096}, {Key: "data/b", Size: 2*4096 + 1}}, 4096)
			tasks, err := r.store.TaskListStage(r.ctx, job, 0, len(want))
			if err != nil || len(tasks) != len(want) || r.stage(job, 0).Total != len(want) {
				t.Fatalf("%d tasks (%v), want %d", len(tasks), err, len(want))
			}
			for i, task := range tasks {
				if task.Input == nil || *task.Input != want[i] {
					t.Errorf("task %d input %v, want %v", i, task.Input, want[i])
				}
			}
			raw, ok := r.blob.Object(blob.PlanKey(job, "s"))
			var plan []split.Split
			if !ok || json.Unmarshal(raw, &plan) != nil || !cmp.Equal(plan, want) {
				t.Errorf("plan object %s = %s, want the splits", blob.PlanKey(job, "s"), raw)
			}
		},
	}, {
		name:    "an empty prefix allowed empty completes the stage and the job at once",
		objects: map[string]int{"other/c": 10},
		spec:    strings.Replace(inputSpec, `"splitSize"`, `"allowEmpty":true,"splitSize"`, 1),
		check: func(t *testing.T, r *unitRig, job string) {
			if st := r.stage(job, 0); st.State != sm.StageCompleted || st.Total != 0 {
				t.Errorf("stage %+v, want COMPLETED with no tasks", st)
			}
			if j := r.job(job); j.State != sm.JobSucceeded {
				t.Errorf("job %s (%s), want SUCCEEDED", j.State, j.Error)
			}
			if keys := r.manifestKeys(blob.JobManifestKey(job)); len(keys) != 0 {
				t.Errorf("manifest lists %v, want nothing", keys)
			}
		},
	}, {
		name:    "an input key too long for a task record fails the job",
		objects: map[string]int{"data/" + strings.Repeat("k", MaxInputKey): 10},
		check: func(t *testing.T, r *unitRig, job string) {
			if st := r.stage(job, 0); st.State != sm.StageFailed {
				t.Errorf("stage %s, want FAILED", st.State)
			}
			if j := r.job(job); j.State != sm.JobFailed || !strings.Contains(j.Error, `stage "s": plan input`) || !strings.Contains(j.Error, domain.ErrBadInput.Error()) {
				t.Errorf("job %s (%q), want FAILED by the bad input", j.State, j.Error)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			for k, size := range c.objects {
				r.blob.Put("in-bucket", k, make([]byte, size))
			}
			sp := inputSpec
			if c.spec != "" {
				sp = c.spec
			}
			c.check(t, r, r.submit(sp))
		})
	}
}

// A shuffle stage's manifest is what its downstream reads, so it is
// written before the downstream starts; and only for a stage that
// completed, so after the completion, which holds only while the job
// runs.
func TestShuffleManifestBeforeDownstreamStarts(t *testing.T) {
	t.Parallel()
	const shuffleSpec = `{"name":"unit","lease":"10s","stages":[` +
		`{"name":"map","task":"m","partitions":{"count":2},"shuffle":{"partitions":3}},` +
		`{"name":"reduce","task":"r","after":["map"]}]}`
	cases := []struct {
		name      string
		blobFault testdouble.Hook
	}{
		{name: "the last commit completes the stage, writes the manifest, then starts the downstream"},
		{name: "the manifest write fails: the downstream stays BLOCKED until the sweep writes it", blobFault: testdouble.FailOnce("PutIfAbsent")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			job := r.submit(shuffleSpec)
			m0, m1 := r.claim(taskRef(job, 0, 0)), r.claim(taskRef(job, 0, 1))
			r.commit(m0, 3)
			r.queue.Drain()
			r.blob.SetFault(c.blobFault)
			r.output(m1, 3)
			completed := fmt.Sprintf("stage %s/0 complete", job)
			started := fmt.Sprintf("stage %s/1 start", job)
			if err := r.svc.Commit(r.ctx, m1, CommitResult{Outputs: 3}); c.blobFault != nil {
				if !errors.Is(err, testdouble.ErrInjected) {
					t.Fatalf("commit with the manifest write failing: %v", err)
				}
				if st := r.stage(job, 1); st.State != sm.StageBlocked || r.log.Index(started) >= 0 {
					t.Fatalf("downstream stage %s without its upstream's manifest, want BLOCKED", st.State)
				}
				r.clock.Advance(r.store.DueOf(stageItem(job, 0)).Sub(r.clock.Now()))
				r.sweep()
			} else if err != nil {
				t.Fatalf("commit: %v", err)
			}
			key := blob.StageManifestKey(job, "map")
			put := r.log.Index("put " + key)
			done, start := r.log.Index(completed), r.log.Index(started)
			if put < 0 || done < 0 || start < 0 || put < done || put > start {
				t.Fatalf("manifest written at %d, stage completed at %d, downstream started at %d: want the manifest between them (journal %v)", put, done, start, r.log.All())
			}
			var want []string
			for p := range 2 {
				for part := range 3 {
					want = append(want, blob.OutputKey(job, "map", p, 1, part))
				}
			}
			if diff := cmp.Diff(want, r.manifestKeys(key)); diff != "" {
				t.Errorf("stage manifest (-want +got):\n%s", diff)
			}
			reduce := r.stage(job, 1)
			if reduce.State != sm.StageRunning || !reduce.Materialized || reduce.Total != 3 {
				t.Fatalf("reduce %+v, want RUNNING with one task per shuffle partition", reduce)
			}
			if counts := bodyCounts(r.queue.Drain()); len(counts) != 3 {
				t.Errorf("reduce messages %v, want one per task", counts)
			}
			for p := range 3 {
				r.commit(r.claim(taskRef(job, 1, p)), 1)
			}
			r.wantState(taskRef(job, 1, 0), sm.TaskSucceeded, sm.StageCompleted, sm.JobSucceeded)
			if keys := r.manifestKeys(blob.JobManifestKey(job)); len(keys) != 3 || !strings.Contains(keys[0], "/out/reduce/") {
				t.Errorf("job manifest %v, want the reduce outputs only", keys)
			}
		})
	}
}

// Commits racing to finish two upstream stages of a third: each stage
// completes once, the third starts once and gets one message, and the job
// succeeds once. The fake's mutex makes each store call atomic, so the
// goroutines interleave at call boundaries as processes do.
func TestConcurrentCompletions(t *testing.T) {
	t.Parallel()
	const dag = `{"name":"unit","lease":"10s","stages":[` +
		`{"name":"a","task":"work","partitions":{"count":2}},` +
		`{"name":"b","task":"work","partitions":{"count":1}},` +
		`{"name":"c","task":"work","after":["a","b"],"partitions":{"count":1}}]}`
	for i := range 20 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t)
			job := r.submit(dag)
			cs := []Claim{r.claim(taskRef(job, 0, 0)), r.claim(taskRef(job, 0, 1)), r.claim(taskRef(job, 1, 0))}
			for _, c := range cs {
				r.output(c, 1)
			}
			r.queue.Drain()
			var wg sync.WaitGroup
			for _, c := range cs {
				wg.Go(func() {
					if err := r.svc.Commit(r.ctx, c, CommitResult{Outputs: 1}); err != nil {
						t.Errorf("commit %s: %v", c.Task.Ref, err)
					}
				})
			}
			wg.Wait()
			for _, e := range []string{"stage %s/0 complete", "stage %s/1 complete", "stage %s/2 start"} {
				if n := r.log.Count(fmt.Sprintf(e, job)); n != 1 {
					t.Errorf("%q happened %d times, want once", fmt.Sprintf(e, job), n)
				}
			}
			if counts := bodyCounts(r.queue.Drain()); len(counts) != 1 || counts[taskRef(job, 2, 0).String()] != 1 {
				t.Errorf("messages %v, want one for c's task", counts)
			}
			r.commit(r.claim(taskRef(job, 2, 0)), 1)
			if n := r.log.Count(fmt.Sprintf("job %s succeed", job)); n != 1 || r.job(job).State != sm.JobSucceeded {
				t.Errorf("job succeeded %d times, state %s", n, r.job(job).State)
			}
		})
	}
}
