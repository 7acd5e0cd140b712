package emuprobe

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTicks = 100

// EmulatorCPU is the CPU time (user and system) that this process's
// descendants, the emulators, have used so far, read from /proc; false
// where there is none.
func EmulatorCPU() (time.Duration, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	if len(stats) == 0 {
		return 0, false
	}
	type proc struct {
		ppid  int
		ticks int64
	}
	procs := map[int]proc{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		// pid (comm) state ppid ... utime stime: comm may hold spaces.
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, '(')]))
		fields := strings.Fields(s[i+1:])
		if err != nil || len(fields) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		ut, _ := strconv.ParseInt(fields[11], 10, 64)
		st, _ := strconv.ParseInt(fields[12], 10, 64)
		procs[pid] = proc{ppid: ppid, ticks: ut + st}
	}
	self := os.Getpid()
	var ticks int64
	for pid, p := range procs {
		// A descendant: some ancestor is this process.
		for a, seen := p.ppid, 0; a > 1 && seen < 64; seen++ {
			if a == self {
				ticks += procs[pid].ticks
				break
			}
			a = procs[a].ppid
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}
