package main

import (
	"fmt"
	"time"
)

// cpuTarget is the bound on the bench process's CPU per no-op
// task: control plane and executors, the recording middleware included
// (a few percent of it, see docs/performance.md), the emulators not.
const cpuTarget = 600 * time.Microsecond

// cpuVerdict is the line that judges a job's CPU per task against
// cpuTarget. bare is the mix probe's CPU a task (its receive, claim,
// commit and delete through the control plane, with no executor around
// them): what this machine's cores take for the requests and their
// control plane alone, so a reader can tell a slow machine from slow
// executors.
func cpuVerdict(cpu time.Duration, tasks int, bare time.Duration) string {
	per := cpu / time.Duration(tasks)
	verdict := "met"
	if per > cpuTarget {
		verdict = "MISSED"
	}
	line := fmt.Sprintf("  CPU per no-op task %d µs (target <= %d µs): %s", per.Microseconds(), cpuTarget.Microseconds(), verdict)
	if bare > 0 {
		// The probe runs before and after the job, in other stretches of
		// the machine's pace: its figure can exceed the job's.
		line += fmt.Sprintf("; the mix probe's claims and commits with no executor take %d µs a task on this machine, the executors around them %d µs",
			bare.Microseconds(), max(0, per-bare).Microseconds())
	}
	return line
}
