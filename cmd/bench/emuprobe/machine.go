package emuprobe

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// MachineBusy is the CPU time all the machine's processes have used so
// far (/proc/stat's first line: user, nice, system, irq, softirq, steal);
// false where there is none.
func MachineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, false
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, true
}

// ourCPU is the CPU this process and its descendants (the emulators)
// have used so far.
func ourCPU() time.Duration {
	e, _ := EmulatorCPU()
	return CPUTime() + e
}

// Others measures what the machine's other work (other processes than
// this one and its emulators) takes of its cores over a span.
type Others struct {
	busy, ours time.Duration
	at         time.Time
	ok         bool
}

// StartOthers starts the span.
func StartOthers() Others {
	b, ok := MachineBusy()
	return Others{busy: b, ours: ourCPU(), at: time.Now(), ok: ok}
}

// Cores is the cores the other work kept busy since o started, on
// average; 0 where /proc/stat is not there.
func (o Others) Cores() float64 {
	b, ok := MachineBusy()
	wall := time.Since(o.at)
	if !ok || !o.ok || wall <= 0 {
		return 0
	}
	other := (b - o.busy) - (ourCPU() - o.ours)
	return max(0, other.Seconds()/wall.Seconds())
}

// CoresLeft is the machine's cores less what other work took.
func CoresLeft(other float64) float64 {
	return max(0.1, float64(runtime.NumCPU())-other)
}
