package check

import (
	"fmt"
	"slices"
	"time"
)

// Copy is a speculative copy's claim as its executor reported it (the
// control plane's "speculative copy claimed" line): attempt Attempt of a
// task, run beside the claim of HolderAttempt.
type Copy struct {
	Job                       string
	Stage, Partition, Attempt int
	HolderAttempt             int
	At                        time.Time
	Proc                      string
}

// aCopiesLaunched is the stage's count of the copies it launched, added
// in each copy's claim transaction (shared/dynamo/speculationstats.go).
const aCopiesLaunched = "xl"

// speculation checks a job's speculative copies. A copy is a second
// claim of a running task, so its claim and its commit are legitimate
// where an attempt's would not be: the task's holder may still run. What
// stays forbidden: a copy in a stage that does not speculate, a copy the
// stage did not count as launched, a copy that is not newer than the
// claim it runs beside, and both the copy and its holder committing (the
// loser must be fenced).
func (c *checker) speculation(rec *jobRec) {
	copies := c.copies[rec.ID]
	byStage := map[int]int{}
	for _, cp := range copies {
		byStage[cp.Stage]++
		c.res.Copies++
		st := rec.Stages[cp.Stage]
		name := fmt.Sprint(cp.Stage)
		if st != nil && st.Name != "" {
			name = st.Name
		}
		where := fmt.Sprintf("task %s/%d", name, cp.Partition)
		if cp.Stage >= len(rec.Spec.Stages) || rec.Spec.Stages[cp.Stage].Speculation == nil {
			c.fail("%s: speculative copy attempt %d (by %s) in a stage without speculation", where, cp.Attempt, cp.Proc)
		}
		if cp.HolderAttempt < 1 || cp.Attempt <= cp.HolderAttempt {
			c.fail("%s: speculative copy attempt %d runs beside holder attempt %d, which is not older", where, cp.Attempt, cp.HolderAttempt)
		}
		var committed []int
		for _, cm := range c.commits[rec.ID][taskID{rec.ID, cp.Stage, cp.Partition}] {
			if (cm.Attempt == cp.Attempt || cm.Attempt == cp.HolderAttempt) && !slices.Contains(committed, cm.Attempt) {
				committed = append(committed, cm.Attempt)
			}
		}
		switch {
		case len(committed) > 1:
			c.fail("%s: speculative copy attempt %d and its holder attempt %d both committed: the loser was not fenced", where, cp.Attempt, cp.HolderAttempt)
		case len(committed) == 1 && committed[0] == cp.Attempt:
			c.res.CopiesWon++
		}
	}
	for _, st := range rec.sortedStages() {
		if n := byStage[st.Index]; n > st.CopiesLaunched {
			c.fail("stage %s: %d speculative copies reported claimed, the stage counts %d launched", st.Name, n, st.CopiesLaunched)
		}
	}
}

func (c *checker) addCopies(cs []Copy) {
	for _, cp := range cs {
		c.copies[cp.Job] = append(c.copies[cp.Job], cp)
	}
}
