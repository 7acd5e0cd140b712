package check

import "slices"

// Reruns. A rerun is a new job with its source's spec that runs the
// stages from RerunFrom on and reuses the others: a reused stage runs no
// task (it has no task records and no counters, and completes at once
// with its source stage's task total), and its outputs in the rerun's
// manifests are its source's committed outputs, at the source's keys.
// The checker accepts such a stage only where the rerun may reuse one:
// a stage the rerun did not have to run, reused from the job it reran.
// Everything else of a rerun is checked as any job's, and its outputs are
// compared with the fault-free run's twin of its source.

// rerunStages is the set of stages a rerun from stage from runs: from and
// every stage downstream of it.
func rerunStages(s specDoc, from string) map[int]bool {
	run := map[int]bool{}
	if i := s.index(from); i >= 0 {
		run[i] = true
	}
	for grew := true; grew; {
		grew = false
		for i, st := range s.Stages {
			if run[i] {
				continue
			}
			for _, up := range st.After {
				if run[s.index(up)] {
					run[i], grew = true, true
					break
				}
			}
		}
	}
	return run
}

// reuse checks which stages a job reused, and each reused stage's record.
func (c *checker) reuse(rec *jobRec) {
	j := c.cur
	if j.RerunOf == "" {
		if len(rec.Reused) > 0 {
			c.fail("reuses the outputs of stages %v, but it is no rerun", sortedKeys(rec.Reused))
		}
		return
	}
	c.res.Reruns++
	run := rerunStages(rec.Spec, j.RerunFrom)
	if len(run) == 0 {
		c.fail("a rerun from stage %q, which its spec does not have", j.RerunFrom)
	}
	src := c.chaos[j.RerunOf]
	for i, sp := range rec.Spec.Stages {
		from, reused := rec.Reused[i]
		switch {
		case run[i] && reused:
			c.fail("stage %s is reused from job %s, but a rerun from %s runs it", sp.Name, from, j.RerunFrom)
			continue
		case !run[i] && !reused:
			c.fail("stage %s ran again, but a rerun from %s reuses it", sp.Name, j.RerunFrom)
			continue
		case !reused:
			continue
		case from != j.RerunOf:
			c.fail("stage %s is reused from job %s, not from job %s that it reran", sp.Name, from, j.RerunOf)
			continue
		}
		st := rec.Stages[i]
		var had *stageRec
		if src != nil {
			had = src.Stages[i]
		}
		switch {
		case had == nil || had.State != Completed:
			c.fail("stage %s is reused from job %s, where it did not complete", sp.Name, j.RerunOf)
		case st == nil:
			c.fail("reused stage %s has no stage record", sp.Name)
		case len(st.Tasks) > 0:
			c.fail("reused stage %s has %d task records: a reused stage runs no task", sp.Name, len(st.Tasks))
		case len(st.Counters) > 0 || st.Shards != 0:
			c.fail("reused stage %s has %d counters (%d shards): a reused stage counts nothing", sp.Name, len(st.Counters), st.Shards)
		case st.Total != had.Total || st.Tolerated != had.Tolerated:
			c.fail("reused stage %s has %d tasks (%d failed tolerated), its source %d (%d)", sp.Name, st.Total, st.Tolerated, had.Total, had.Tolerated)
		default:
			c.res.ReusedStages++
		}
	}
	for i := range rec.Reused {
		if i < 0 || i >= len(rec.Spec.Stages) {
			c.fail("reuses stage %d, which its spec does not have", i)
		}
	}
}

// stageOwner is the job whose tasks committed stage idx of rec: its
// source for a reused stage (reuse checks that it may be), else rec.
func (c *checker) stageOwner(rec *jobRec, idx int) *jobRec {
	src, ok := rec.Reused[idx]
	if !ok {
		return rec
	}
	if own, ok := c.chaos[src]; ok {
		return own
	}
	return &jobRec{ID: src, Stages: map[int]*stageRec{}}
}

func sortedKeys(m map[int]string) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
