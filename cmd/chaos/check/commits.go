package check

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Commit is one commit an executor reported as it happened (its "task
// committed" line): the history a task record cannot keep, as a second
// commit would overwrite the first's attempt in it. A commit whose
// executor died before its line is missing here, and the record speaks
// for it.
type Commit struct {
	Job                       string
	Stage, Partition, Attempt int
	At                        time.Time
	Proc                      string
}

type taskID struct {
	Job              string
	Stage, Partition int
}

// commitHistory checks each task's reported commits: one attempt at most
// committed it, and that attempt is the one its record holds. Two
// attempts reporting a commit, or a record naming another attempt (or no
// commit at all), is a task committed twice or a commit undone.
func (c *checker) commitHistory(rec *jobRec) {
	byTask := c.commits[rec.ID]
	ids := make([]taskID, 0, len(byTask))
	for id := range byTask {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b taskID) int {
		if a.Stage != b.Stage {
			return a.Stage - b.Stage
		}
		return a.Partition - b.Partition
	})
	for _, id := range ids {
		cs := byTask[id]
		c.res.Commits += len(cs)
		name := fmt.Sprint(id.Stage)
		st := rec.Stages[id.Stage]
		if st != nil && st.Name != "" {
			name = st.Name
		}
		where := fmt.Sprintf("task %s/%d", name, id.Partition)
		var attempts []int
		var evidence []string
		for _, cm := range cs {
			if !slices.Contains(attempts, cm.Attempt) {
				attempts = append(attempts, cm.Attempt)
			}
			evidence = append(evidence, fmt.Sprintf("attempt %d committed at %s by %s", cm.Attempt, ms(cm.At), cm.Proc))
		}
		slices.Sort(attempts)
		if len(attempts) > 1 {
			c.fail("%s committed by %d attempts (%s): %s", where, len(attempts), joinInts(attempts), strings.Join(evidence, "; "))
			continue
		}
		var t *taskRec
		if st != nil {
			t = st.Tasks[id.Partition]
		}
		switch {
		case t == nil:
			c.fail("%s: %s, but the task has no record", where, evidence[0])
		case t.State != Succeeded || t.CommittedAttempt != attempts[0]:
			c.fail("%s: %s, but its record is %s with committed attempt %d: the commit was overwritten or undone", where, evidence[0], t.State, t.CommittedAttempt)
		}
	}
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}

func (c *checker) addCommits(cs []Commit) {
	for _, cm := range cs {
		byTask := c.commits[cm.Job]
		if byTask == nil {
			byTask = map[taskID][]Commit{}
			c.commits[cm.Job] = byTask
		}
		id := taskID{cm.Job, cm.Stage, cm.Partition}
		byTask[id] = append(byTask[id], cm)
	}
}
