//go:build !linux

package execstage

import "syscall"

// dataLimited: no data limit is set here.
const dataLimited = false

// cpuLimitSignal: no CPU time limit is set here.
const cpuLimitSignal = syscall.Signal(-1)

// startGuard: without prlimit(2) and /proc, a program runs without
// limits (limits.go); Batchwork's executors run on Linux.
func startGuard(name string, pid int, lim Limits, kill func(error)) (*execGuard, func()) {
	return &execGuard{name: name}, func() {}
}
