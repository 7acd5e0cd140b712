package check

import (
	"encoding/json"
	"fmt"
	"time"
)

// addStage gives the job a second stage b, independent of map (both are
// sinks), with one task that committed its first attempt.
func (h *history) addStage() {
	id := h.rec.ID
	h.rec.Spec.Stages = append(h.rec.Spec.Stages, specStage{Name: "b"})
	h.rec.Stages[1] = &stageRec{Index: 1, Name: "b", State: Completed, Total: 1, Shards: 1, Materialized: true,
		Started: t0, Ended: t0.Add(3 * time.Second),
		Tasks:    map[int]*taskRec{0: {Partition: 0, State: Succeeded, Attempt: 1, MaxAttempts: 3, CommittedAttempt: 1, Outputs: 1, Updated: t0.Add(2 * time.Second)}},
		Counters: map[int]*counterRec{0: {Left: 0, Total: 1, Done: []int{0}}}, Ends: map[int][]attemptEnd{}}
	h.objects[outputKey(id, "b", 0, 1, 0)] = []byte("output b\n")
	h.starts = append(h.starts, Start{Job: id, Stage: 1, Partition: 0, Attempt: 1, At: t0.Add(time.Second), Proc: "exec-1"})
	h.commits = append(h.commits, Commit{Job: id, Stage: 1, Partition: 0, Attempt: 1, At: t0.Add(2 * time.Second), Proc: "exec-1"})
	h.setManifest(id)
}

// setManifest writes the job manifest: map's outputs, committed by job
// mapOwner (the job itself, or a rerun's source), and b's if it has b.
func (h *history) setManifest(mapOwner string) {
	var outs []manifestOutput
	for p := range 2 {
		outs = append(outs, manifestOutput{Stage: "map", Partition: p, Attempt: 1, Key: outputKey(mapOwner, "map", p, 1, 0)})
	}
	if len(h.rec.Spec.Stages) > 1 {
		outs = append(outs, manifestOutput{Stage: "b", Partition: 0, Attempt: 1, Key: outputKey(h.rec.ID, "b", 0, 1, 0)})
	}
	h.objects[jobManifestKey(h.rec.ID)], _ = json.Marshal(manifest{Job: h.rec.ID, Outputs: outs})
}

// rerun makes the job a sound rerun from b of job src1, which ran map and
// b: the rerun reuses map (no task records, no counters, src1's outputs
// in its manifest) and runs b. The fault-free run's twin is src1's.
func (h *history) rerun() {
	src := soundHistory("src1")
	src.addStage()
	h.others = map[string]*jobRec{"src1": src.rec}
	for k, v := range src.objects {
		h.objects[k] = v
	}
	h.addStage()
	st := h.rec.Stages[0]
	st.Tasks, st.Counters, st.Shards = map[int]*taskRec{}, map[int]*counterRec{}, 0
	for p := range 2 {
		delete(h.objects, outputKey(h.rec.ID, "map", p, 1, 0))
	}
	h.starts, h.commits = h.starts[2:], h.commits[2:]
	h.rec.Reused = map[int]string{0: "src1"}
	h.setManifest("src1")
	h.job.RerunOf, h.job.RerunFrom = "src1", "b"
	h.refMutate = func(r *history) { r.addStage(); r.refMutate = nil }
}

// rerunCases are TestCheckerSeesViolations's cases of reruns.
var rerunCases = []struct {
	name   string
	mutate func(h *history)
	want   string
}{
	{"sound rerun", func(h *history) { h.rerun() }, ""},
	{"a rerun reused a stage it runs", func(h *history) {
		h.rerun()
		h.job.RerunFrom = "map"
	}, "stage map is reused from job src1, but a rerun from map runs it"},
	{"a rerun ran a stage it reuses", func(h *history) {
		h.rerun()
		h.job.RerunFrom = "map"
	}, "stage b ran again, but a rerun from map reuses it"},
	{"a stage reused from another job", func(h *history) {
		h.rerun()
		h.rec.Reused[0] = "j9"
	}, "stage map is reused from job j9, not from job src1 that it reran"},
	{"reused stages in a job that is no rerun", func(h *history) {
		h.rerun()
		h.job.RerunOf = ""
	}, "reuses the outputs of stages [0], but it is no rerun"},
	{"a reused stage ran a task", func(h *history) {
		h.rerun()
		h.rec.Stages[0].Tasks[0] = &taskRec{Partition: 0, State: Succeeded, Attempt: 1, MaxAttempts: 3, CommittedAttempt: 1, Outputs: 1}
	}, "reused stage map has 1 task records"},
	{"a reused stage with another task count", func(h *history) {
		h.rerun()
		h.rec.Stages[0].Total = 3
	}, "reused stage map has 3 tasks (0 failed tolerated), its source 2 (0)"},
	{"a reused stage wrote an object", func(h *history) {
		h.rerun()
		h.objects[outputKey(h.rec.ID, "map", 0, 1, 0)] = []byte("output 0\n")
	}, "a reused stage runs no task"},
	{"a reused stage's manifest lists the rerun's own key", func(h *history) {
		h.rerun()
		h.objects[outputKey(h.rec.ID, "map", 0, 1, 0)] = []byte("output 0\n")
		h.setManifest(h.rec.ID)
	}, fmt.Sprintf("lists key %s, want %s", outputKey("j1", "map", 0, 1, 0), outputKey("src1", "map", 0, 1, 0))},
	{"a reused stage's manifest lists an attempt the source did not commit", func(h *history) {
		h.rerun()
		tk := h.others["src1"].Stages[0].Tasks[1]
		tk.Attempt, tk.CommittedAttempt = 2, 2
	}, "lists attempt 1 of task map/1, whose committed attempt is 2"},
	{"a reused stage's manifest misses a source output", func(h *history) {
		h.rerun()
		h.others["src1"].Stages[0].Tasks[1].Outputs = 2
	}, "misses part 1 of task map/1"},
}
