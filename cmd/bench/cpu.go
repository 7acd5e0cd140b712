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
// commit and delete with no executor around them): what this machine's
// cores take for the requests alone, so a reader can tell a slow machine
// from a slow framework.
func cpuVerdict(cpu time.Duration, tasks int, bare time.Duration) string {
	per := cpu / time.Duration(tasks)
	verdict := "met"
	if per > cpuTarget {
		verdict = "MISSED"
	}
	line := fmt.Sprintf("  CPU per no-op task %d µs (target <= %d µs): %s", per.Microseconds(), cpuTarget.Microseconds(), verdict)
	if bare > 0 {
		line += fmt.Sprintf("; the bare requests (the mix probe's) take %d µs a task on this machine, the framework around them %d µs",
			bare.Microseconds(), (per - bare).Microseconds())
	}
	return line
}
