//go:build unix

package emuprobe

import (
	"syscall"
	"time"
)

// CPUTime is the CPU time (user and system) this process has used so far:
// the control plane and executors it hosts, not the emulators, which run
// in processes of their own.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
