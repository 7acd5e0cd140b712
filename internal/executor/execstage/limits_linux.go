package execstage

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
	"unsafe"
)

// dataLimited: the kernel's data limit applies (RLIMIT_DATA counts
// anonymous memory since Linux 4.7), so a failed allocation in a program
// is its memory limit's doing.
const dataLimited = true

// cpuLimitSignal is what the kernel sends a process at its CPU time's
// soft limit.
const cpuLimitSignal = syscall.SIGXCPU

// userHZ is the unit of /proc's CPU times, fixed by the kernel's ABI.
const userHZ = 100

// startGuard puts the started program pid (the leader of its own process
// group) under lim: the kernel's limits, then the watchdog, which calls
// kill with its verdict when the group passes one. stop ends the watchdog.
func startGuard(name string, pid int, lim Limits, kill func(error)) (g *execGuard, stop func()) {
	g = &execGuard{name: name, lim: lim}
	if lim.Memory > 0 {
		// The limit is set just after the program started, which it may
		// have used already; the watchdog and the peak at exit see that.
		prlimit(pid, syscall.RLIMIT_DATA, uint64(lim.Memory), uint64(lim.Memory))
	}
	if lim.CPUTime > 0 {
		s := uint64((lim.CPUTime + time.Second - 1) / time.Second)
		prlimit(pid, syscall.RLIMIT_CPU, s, s+1) // SIGXCPU, then SIGKILL
	}
	if lim == (Limits{}) {
		return g, func() {}
	}
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		tick := time.NewTicker(execWatchEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			rss, cpu := groupUsage(pid)
			switch {
			case lim.Memory > 0 && rss > uint64(lim.Memory):
				g.setVerdict(g.memoryError(rss))
			case lim.CPUTime > 0 && cpu > lim.CPUTime:
				g.setVerdict(g.cpuError(cpu, ""))
			default:
				continue
			}
			kill(g.verdict)
			return
		}
	}()
	return g, func() {
		close(done)
		<-ended
	}
}

// prlimit sets resource's limits of process pid. A failure is ignored:
// the process may have exited already, and the watchdog still applies.
func prlimit(pid, resource int, cur, max uint64) {
	lim := syscall.Rlimit{Cur: cur, Max: max}
	syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(resource), uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
}

// groupUsage sums the resident memory and the CPU time (with that of the
// children they waited for) of process group pgid's processes.
func groupUsage(pgid int) (rss uint64, cpu time.Duration) {
	dir, err := os.Open("/proc")
	if err != nil {
		return 0, 0
	}
	defer dir.Close()
	names, _ := dir.Readdirnames(-1)
	page := uint64(os.Getpagesize())
	var ticks uint64
	for _, n := range names {
		if n[0] < '0' || n[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + n + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// The command name, in parentheses, may hold spaces: the fields
		// that follow start after its last ')', with the state (field 3).
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 22 {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err != nil || g != pgid { // field 5, pgrp
			continue
		}
		for _, k := range []int{11, 12, 13, 14} { // fields 14-17: utime, stime, cutime, cstime
			v, _ := strconv.ParseUint(string(f[k]), 10, 64)
			ticks += v
		}
		pages, _ := strconv.ParseUint(string(f[21]), 10, 64) // field 24, rss
		rss += pages * page
	}
	return rss, time.Duration(ticks) * time.Second / userHZ
}
