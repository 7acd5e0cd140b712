package main

import "github.com/batchwork/batchwork/cmd/chaos/check"

// lastAttempts is how many of a task's attempts the kills spare: an
// executor running one of a task's last two attempts is not killed. A
// kill costs the task an attempt, as a task error does, and the chance
// that a task of a few seconds is killed on every one of its attempts
// grows as the machine slows; a run that ended a job FAILED that way
// would fail make test on the machine's pace, not on a broken guarantee.
// Sparing the last attempts makes exhausting a budget by kills
// impossible rather than unlikely, and leaves every other attempt (and
// so every recovery path) to the kills.
const lastAttempts = 2

// victims returns the executors a kill may take: those running no
// uncommitted task on one of its last attempts. claims are each
// executor's reported claims, committed the tasks that committed, and
// budget the specs' retry.maxAttempts.
func victims(names []string, claims map[string][]check.Start, committed map[check.Attempt]bool, budget int) []int {
	var out []int
	for i, name := range names {
		spare := false
		for _, c := range claims[name] {
			task := check.Attempt{Job: c.Job, Stage: c.Stage, Partition: c.Partition}
			if c.Attempt > budget-lastAttempts && !committed[task] {
				spare = true
				break
			}
		}
		if !spare {
			out = append(out, i)
		}
	}
	return out
}
