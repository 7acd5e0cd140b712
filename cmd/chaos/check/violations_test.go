package check

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// memObjects is a bucket in memory.
type memObjects map[string][]byte

func (m memObjects) get(_ context.Context, key string) ([]byte, error) {
	b, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("%s: %w", key, errNoObject)
	}
	return b, nil
}

func (m memObjects) list(_ context.Context, prefix string) ([]string, error) {
	var keys []string
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys, nil
}

// history is one run's record of a one-stage, two-task job as the
// checker reads it, built sound, for a case to break.
type history struct {
	rec     *jobRec
	objects memObjects
	starts  []Start
	commits []Commit
	copies  []Copy
	job     Job
	// keys are the table's other items ("pk sk job").
	keys []string
	// refMutate, when set, changes the fault-free run's twin too.
	refMutate func(*history)
	// others are the chaos run's other jobs (a rerun's source).
	others map[string]*jobRec
}

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func soundHistory(id string) *history {
	h := &history{objects: memObjects{}, job: Job{ID: id, Reference: "ref-" + id, Kind: "test"}}
	st := &stageRec{Index: 0, Name: "map", State: Completed, Total: 2, Shards: 1, Materialized: true,
		Started: t0, Ended: t0.Add(3 * time.Second), Tasks: map[int]*taskRec{},
		Counters: map[int]*counterRec{0: {Left: 0, Total: 2, Done: []int{0, 1}}}, Ends: map[int][]attemptEnd{}}
	h.rec = &jobRec{ID: id, State: Succeeded, Manifest: jobManifestKey(id), Ended: t0.Add(4 * time.Second),
		Spec: specDoc{Stages: []specStage{{Name: "map"}}}, Stages: map[int]*stageRec{0: st}}
	var outs []manifestOutput
	for p := range 2 {
		st.Tasks[p] = &taskRec{Partition: p, State: Succeeded, Attempt: 1, MaxAttempts: 3, CommittedAttempt: 1, Outputs: 1,
			Updated: t0.Add(2 * time.Second)}
		key := outputKey(id, "map", p, 1, 0)
		h.objects[key] = fmt.Appendf(nil, "output %d\n", p)
		outs = append(outs, manifestOutput{Stage: "map", Partition: p, Attempt: 1, Part: 0, Key: key})
		h.starts = append(h.starts, Start{Job: id, Partition: p, Attempt: 1, At: t0.Add(time.Second), Proc: "exec-1"})
		h.commits = append(h.commits, Commit{Job: id, Partition: p, Attempt: 1, At: t0.Add(2 * time.Second), Proc: "exec-1"})
	}
	h.objects[jobManifestKey(id)], _ = json.Marshal(manifest{Job: id, Outputs: outs})
	return h
}

// reference is the fault-free run's twin of a history.
func (h *history) reference() (*jobRec, memObjects) {
	r := soundHistory(h.job.Reference)
	if h.refMutate != nil {
		h.refMutate(r)
	}
	return r.rec, r.objects
}

func (h *history) check(t *testing.T) []Violation {
	t.Helper()
	c := h.checker(t)
	if err := c.job(context.Background(), h.job); err != nil {
		t.Fatalf("check: %v", err)
	}
	return c.res.Violations
}

// checker is a checker of the history and its fault-free twin.
func (h *history) checker(t *testing.T) *checker {
	t.Helper()
	refRec, refObjects := h.reference()
	chaos := map[string]*jobRec{h.rec.ID: h.rec}
	for id, rec := range h.others {
		chaos[id] = rec
	}
	if h.job.Deleted {
		chaos = map[string]*jobRec{}
	}
	c := &checker{
		chaos: chaos, keys: h.keys, ref: map[string]*jobRec{refRec.ID: refRec},
		chaosS3: store{objects: h.objects, bucket: "chaos"}, refS3: store{objects: refObjects, bucket: "ref"},
		starts: map[attemptRef]Start{}, commits: map[string]map[taskID][]Commit{}, copies: map[string][]Copy{}, startGrace: time.Second,
		res: Result{States: map[string]int{}},
	}
	c.addCopies(h.copies)
	for _, s := range h.starts {
		c.starts[attemptRef{s.Job, s.Stage, s.Partition, s.Attempt}] = s
	}
	c.addCommits(h.commits)
	return c
}

// cancelAt turns a sound history into a job cancelled at at, whose stage
// had not completed then.
func (h *history) cancelAt(at time.Time) {
	h.job.Cancelled, h.job.CancelAccepted = true, at
	h.rec.State, h.rec.Manifest, h.rec.Ended = Cancelled, "", at
	st := h.rec.Stages[0]
	st.State, st.Ended = Cancelled, time.Time{}
	st.Tasks[1].State, st.Tasks[1].CommittedAttempt, st.Tasks[1].Outputs = "FAILED", 0, 0
	st.Counters[0] = &counterRec{Left: 1, Total: 2, Done: []int{0}}
	h.commits = h.commits[:1]
	delete(h.objects, jobManifestKey(h.rec.ID))
}

// tolerate makes task 1 a failure its stage tolerated, of allowed.
func (h *history) tolerate(allowed int) {
	h.rec.Spec.Stages[0].ToleratedFailures = &tolerance{Count: allowed}
	st := h.rec.Stages[0]
	st.Tolerated = 1
	tk := st.Tasks[1]
	tk.State, tk.Tolerated, tk.CommittedAttempt, tk.Outputs = Failed, true, 0, 0
	st.Counters[0].Done = []int{0}
	h.commits = h.commits[:1]
	delete(h.objects, outputKey(h.rec.ID, "map", 1, 1, 0))
	h.objects[jobManifestKey(h.rec.ID)], _ = json.Marshal(manifest{Job: h.rec.ID, Outputs: []manifestOutput{
		{Stage: "map", Partition: 0, Attempt: 1, Key: outputKey(h.rec.ID, "map", 0, 1, 0)}}})
	// The fault-free run's twin had the same failure.
	h.refMutate = func(r *history) { r.tolerate(allowed); r.refMutate = nil }
}

// deleteJob makes the job one the harness deleted, and deleted well:
// nothing of it is left.
func (h *history) deleteJob() {
	h.job.Deleted = true
	h.rec = &jobRec{ID: h.rec.ID}
	h.objects = memObjects{}
}

// failAt makes a job that must miss its deadline end FAILED with err,
// its stage cancelled and no manifest.
func (h *history) failAt(err string) {
	h.job.WantError = "deadline exceeded"
	h.rec.State, h.rec.Err, h.rec.Manifest = Failed, err, ""
	st := h.rec.Stages[0]
	st.State = Cancelled
	delete(h.objects, jobManifestKey(h.rec.ID))
}

// speculate gives task 0 a speculative copy (attempt 2) beside its
// holder (attempt 1), in a stage that speculates; the copy commits when
// copyWins, else the holder does; the other is fenced.
func (h *history) speculate(copyWins bool) {
	h.rec.Spec.Stages[0].Speculation = &struct{}{}
	st := h.rec.Stages[0]
	st.CopiesLaunched = 1
	tk := st.Tasks[0]
	tk.Attempt, tk.MaxAttempts = 2, 4
	h.starts = append(h.starts, Start{Job: h.rec.ID, Partition: 0, Attempt: 2, At: t0.Add(1500 * time.Millisecond), Proc: "exec-2"})
	h.copies = append(h.copies, Copy{Job: h.rec.ID, Partition: 0, Attempt: 2, HolderAttempt: 1, At: t0.Add(1500 * time.Millisecond), Proc: "exec-2"})
	if !copyWins {
		return
	}
	tk.CommittedAttempt = 2
	h.commits[0] = Commit{Job: h.rec.ID, Partition: 0, Attempt: 2, At: t0.Add(1800 * time.Millisecond), Proc: "exec-2"}
	delete(h.objects, outputKey(h.rec.ID, "map", 0, 1, 0))
	key := outputKey(h.rec.ID, "map", 0, 2, 0)
	h.objects[key] = []byte("output 0\n")
	h.objects[jobManifestKey(h.rec.ID)], _ = json.Marshal(manifest{Job: h.rec.ID, Outputs: []manifestOutput{
		{Stage: "map", Partition: 0, Attempt: 2, Key: key}, {Stage: "map", Partition: 1, Attempt: 1, Key: outputKey(h.rec.ID, "map", 1, 1, 0)}}})
}

// numbered makes the job's outputs (and its twin's) body, checked by a
// Verify that wants its lines numbered 1, 2...: chaostasks.CheckNumbered
// in a run, re-declared here since the checker imports nothing of what
// it checks.
func (h *history) numbered(body string) {
	h.job.Verify = func(b []byte) error {
		for i, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			if !strings.HasPrefix(line, fmt.Sprint(i+1)+"\t") {
				return fmt.Errorf("line %d is %q: records skipped or repeated", i+1, line)
			}
		}
		return nil
	}
	set := func(h *history) {
		for p := range 2 {
			h.objects[outputKey(h.rec.ID, "map", p, 1, 0)] = []byte(body)
		}
	}
	set(h)
	h.refMutate = set
}

// TestCheckerSeesViolations feeds the checker histories that break each
// rule it claims to check, and one that breaks none: a checker that
// cannot fail proves nothing.
func TestCheckerSeesViolations(t *testing.T) {
	type violationCase = struct {
		name   string
		mutate func(h *history)
		want   string // in a violation; "" for none
	}
	for _, tc := range append(append([]violationCase{
		{"sound", func(*history) {}, ""},
		{"sound cancel", func(h *history) { h.cancelAt(t0.Add(2500 * time.Millisecond)) }, ""},
		{"sound tolerated failure", func(h *history) { h.tolerate(1) }, ""},
		{"a failure beyond the tolerated", func(h *history) { h.tolerate(0) }, "1 tasks failed tolerated, the stage counts 1 and allows 0"},
		{"sound deadline", func(h *history) { h.failAt("deadline exceeded") }, ""},
		{"deadline job failed otherwise", func(h *history) { h.failAt("task a/1 failed: boom") }, `want an error with "deadline exceeded"`},
		{"deadline job succeeded", func(h *history) { h.job.WantError = "deadline exceeded" }, "ended SUCCEEDED, want FAILED"},
		{"sound deletion", func(h *history) { h.deleteJob() }, ""},
		{"deletion left a record", func(h *history) {
			h.deleteJob()
			h.keys = []string{"IDX#chaos 2026-11-29#j1 ", "JOB#j2 JOB "}
		}, "deleted job left 1 records: IDX#chaos 2026-11-29#j1"},
		{"deletion left an object", func(h *history) {
			h.deleteJob()
			h.objects[outputKey("j1", "map", 0, 1, 0)] = []byte("output 0\n")
		}, "deleted job left 1 objects"},
		{"two attempts committed one task", func(h *history) {
			// Attempt 1 committed, its lease lapsed, attempt 2 committed
			// over it: the record shows attempt 2 alone.
			tk := h.rec.Stages[0].Tasks[0]
			tk.Attempt, tk.CommittedAttempt = 2, 2
			h.starts = append(h.starts, Start{Job: h.rec.ID, Partition: 0, Attempt: 2, At: t0.Add(2 * time.Second), Proc: "exec-2"})
			h.commits = append(h.commits, Commit{Job: h.rec.ID, Partition: 0, Attempt: 2, At: t0.Add(2500 * time.Millisecond), Proc: "exec-2"})
			key := outputKey(h.rec.ID, "map", 0, 2, 0)
			h.objects[key] = []byte("output 0\n")
			h.objects[jobManifestKey(h.rec.ID)], _ = json.Marshal(manifest{Job: h.rec.ID, Outputs: []manifestOutput{
				{Stage: "map", Partition: 0, Attempt: 2, Key: key}, {Stage: "map", Partition: 1, Attempt: 1, Key: outputKey(h.rec.ID, "map", 1, 1, 0)}}})
		}, "committed by 2 attempts (1, 2)"},
		{"a commit undone", func(h *history) {
			tk := h.rec.Stages[0].Tasks[1]
			tk.Attempt, tk.State, tk.CommittedAttempt = 2, Claimed, 0
			h.rec.State = Running
		}, "the commit was overwritten or undone"},
		{"sound speculative copy that won", func(h *history) { h.speculate(true) }, ""},
		{"sound speculative copy that lost", func(h *history) { h.speculate(false) }, ""},
		{"a copy and its holder both committed", func(h *history) {
			h.speculate(true)
			h.commits = append(h.commits, Commit{Job: h.rec.ID, Partition: 0, Attempt: 1, At: t0.Add(1900 * time.Millisecond), Proc: "exec-1"})
		}, "speculative copy attempt 2 and its holder attempt 1 both committed"},
		{"a copy in a stage that does not speculate", func(h *history) {
			h.speculate(true)
			h.rec.Spec.Stages[0].Speculation = nil
		}, "in a stage without speculation"},
		{"a copy the stage did not count", func(h *history) {
			h.speculate(true)
			h.rec.Stages[0].CopiesLaunched = 0
		}, "1 speculative copies reported claimed, the stage counts 0 launched"},
		{"a copy no newer than its holder", func(h *history) {
			h.speculate(false)
			h.copies[0].HolderAttempt = 2
		}, "runs beside holder attempt 2, which is not older"},
		{"sound checkpointing output", func(h *history) { h.numbered("1\ta\n2\tb\n3\tc\n") }, ""},
		{"a resume skipped a record", func(h *history) { h.numbered("1\ta\n2\tb\n4\td\n") }, "line 3 is \"4\\td\": records skipped or repeated"},
		{"a resume repeated a record", func(h *history) { h.numbered("1\ta\n2\tb\n2\tb\n3\tc\n") }, "records skipped or repeated"},
		{"committed attempt never started", func(h *history) { h.starts = h.starts[1:] }, "was never started by an executor"},
		{"attempt beyond its max", func(h *history) { h.rec.Stages[0].Tasks[0].MaxAttempts = 0; h.rec.Stages[0].Tasks[1].Attempt = 4 }, "beyond max 3"},
		{"counted twice", func(h *history) { h.rec.Stages[0].Counters[0].Total = 3 }, "counts 3 tasks, the stage has 2"},
		{"stuck", func(h *history) { h.rec.State = Running }, "stuck"},
		{"failed", func(h *history) { h.rec.State, h.rec.Err = Failed, "boom" }, "FAILED: boom"},
		{"output differs", func(h *history) { h.objects[outputKey(h.rec.ID, "map", 1, 1, 0)] = []byte("other\n") }, "differs from the fault-free run's"},
		{"manifest lists an uncommitted attempt", func(h *history) {
			h.objects[jobManifestKey(h.rec.ID)], _ = json.Marshal(manifest{Job: h.rec.ID, Outputs: []manifestOutput{
				{Stage: "map", Partition: 0, Attempt: 2, Key: outputKey(h.rec.ID, "map", 0, 2, 0)}, {Stage: "map", Partition: 1, Attempt: 1, Key: outputKey(h.rec.ID, "map", 1, 1, 0)}}})
		}, "lists attempt 2 of task map/0, whose committed attempt is 1"},
		{"stage started before its upstream completed", func(h *history) {
			h.rec.Spec.Stages = append(h.rec.Spec.Stages, specStage{Name: "reduce", After: []string{"map"}})
			h.rec.Stages[1] = &stageRec{Index: 1, Name: "reduce", State: Completed, Started: t0.Add(time.Second), Ended: t0.Add(4 * time.Second),
				Tasks: map[int]*taskRec{}, Counters: map[int]*counterRec{}, Ends: map[int][]attemptEnd{}}
		}, "before its upstream map completed"},
		{"cancelled job started an attempt late", func(h *history) {
			h.cancelAt(t0.Add(500 * time.Millisecond))
			h.rec.Stages[0].Tasks[1].Attempt = 2
			h.starts = append(h.starts, Start{Job: h.rec.ID, Partition: 1, Attempt: 2, At: t0.Add(2 * time.Second), Proc: "exec-2"})
		}, "more than 1s after the cancel returned"},
		{"cancelled job got a job manifest", func(h *history) {
			h.cancelAt(t0.Add(2500 * time.Millisecond))
			h.objects[jobManifestKey(h.rec.ID)] = []byte(`{"job":"x","outputs":[]}`)
		}, "cancelled job has a job manifest"},
		{"cancelled job got a stage manifest", func(h *history) {
			h.cancelAt(t0.Add(2500 * time.Millisecond))
			h.objects[stageManifestKey(h.rec.ID, "map")] = []byte(`{"job":"x","outputs":[]}`)
		}, "cancelled job has a manifest jobs/j1/manifests/map.json of stage map"},
	}, rerunCases...), dynsplitCases...) {
		t.Run(tc.name, func(t *testing.T) {
			h := soundHistory("j1")
			tc.mutate(h)
			vs := h.check(t)
			if tc.want == "" {
				if len(vs) > 0 {
					t.Fatalf("violations in a sound history: %v", vs)
				}
				return
			}
			for _, v := range vs {
				if strings.Contains(v.What, tc.want) {
					return
				}
			}
			t.Fatalf("no violation %q among %v", tc.want, vs)
		})
	}
}
