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

// dynamoLocal is DynamoDB Local's process name (a JVM); moto's is
// another (python), so the two emulators' CPU are told apart.
const dynamoLocal = "java"

// EmulatorCPU is the CPU time (user and system) that this process's
// descendants, the emulators, have used so far, read from /proc; false
// where there is none.
func EmulatorCPU() (time.Duration, bool) {
	by, ok := descendantCPU()
	var all time.Duration
	for _, d := range by {
		all += d
	}
	return all, ok
}

// EmulatorCPUOf is EmulatorCPU of the descendants named comm (/proc's
// process name): DynamoDB Local's "java" alone.
func EmulatorCPUOf(comm string) (time.Duration, bool) {
	by, ok := descendantCPU()
	return by[comm], ok
}

// descendantCPU is this process's descendants' CPU time by process name.
func descendantCPU() (map[string]time.Duration, bool) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	if len(stats) == 0 {
		return nil, false
	}
	type proc struct {
		ppid  int
		ticks int64
		comm  string
	}
	procs := map[int]proc{}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // ended meanwhile
		}
		s := string(b)
		// pid (comm) state ppid ... utime stime: comm may hold spaces.
		i, j := strings.LastIndexByte(s, ')'), strings.IndexByte(s, '(')
		if i < 0 || j < 0 || j > i {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:j]))
		fields := strings.Fields(s[i+1:])
		if err != nil || len(fields) < 13 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		ut, _ := strconv.ParseInt(fields[11], 10, 64)
		st, _ := strconv.ParseInt(fields[12], 10, 64)
		procs[pid] = proc{ppid: ppid, ticks: ut + st, comm: s[j+1 : i]}
	}
	self := os.Getpid()
	by := map[string]time.Duration{}
	for _, p := range procs {
		// A descendant: some ancestor is this process.
		for a, seen := p.ppid, 0; a > 1 && seen < 64; seen++ {
			if a == self {
				by[p.comm] += time.Duration(p.ticks) * time.Second / clockTicks
				break
			}
			a = procs[a].ppid
		}
	}
	return by, true
}
