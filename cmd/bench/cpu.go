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
// cpuTarget.
func cpuVerdict(cpu time.Duration, tasks int) string {
	per := cpu / time.Duration(tasks)
	verdict := "met"
	if per > cpuTarget {
		verdict = "MISSED"
	}
	return fmt.Sprintf("  CPU per no-op task %d µs (target <= %d µs): %s", per.Microseconds(), cpuTarget.Microseconds(), verdict)
}
