package main

import (
	"time"

	"github.com/batchwork/batchwork/cmd/chaos/check"
)

// lastAttempts is how many of a task's attempts the kills spare: an
// executor running one of a task's last two attempts is not killed. A
// kill costs the task an attempt, as a task error does, and the chance
// that a task of a few seconds is killed on every one of its attempts
// grows as the machine slows; a run that ended a job FAILED that way
// would fail make test on the machine's pace, not on a broken guarantee.
// Sparing the last attempts leaves every other attempt (and so every
// recovery path) to the kills. Two, not one: a claim the harness has
// not read yet (its log line in flight) can still be killed.
const lastAttempts = 2

// spareFor bounds how long a claim spares its executor: a task that
// ended without a commit the harness read (failed, cancelled, its job
// deleted, or committed by an executor that died before logging it)
// would otherwise spare it for the rest of the run, and with every
// executor spared the kills would stop. A chaos task runs for seconds.
const spareFor = 30 * time.Second

// victims returns the executors a kill may take at now: those running no
// task on one of its last attempts, that is a claim of such an attempt
// younger than spareFor, still the task's latest attempt, of a task not
// committed. claims are each executor's reported claims, latest each
// task's latest attempt seen, committed the tasks that committed, and
// budget the specs' retry.maxAttempts.
func victims(names []string, claims map[string][]check.Start, latest map[check.Attempt]int, committed map[check.Attempt]bool, budget int, now time.Time) []int {
	var out []int
	for i, name := range names {
		spare := false
		for _, c := range claims[name] {
			task := check.Attempt{Job: c.Job, Stage: c.Stage, Partition: c.Partition}
			if c.Attempt > budget-lastAttempts && c.Attempt == latest[task] && !committed[task] && now.Sub(c.At) < spareFor {
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
