package execstage

// Resource limits of exec stages' programs. A program runs under its
// attempt's executor size (spec Resources: memory, raised after an
// out-of-memory end) as its memory limit, and under the stage's
// resources.cpuTime, when set, as its CPU time limit. The executor's own
// memory limit (GOMEMLIMIT, the Lambda watchdog in executor's memory.go) does not
// cover its children, and neither Lambda nor Fargate lets a task create
// cgroups of its own, so the limits are the kernel's per-process ones and
// a watchdog over the program's process group:
//
//   - RLIMIT_DATA at the memory limit, set on the started program with
//     prlimit(2) and inherited by what it starts: an allocation past it
//     fails in the program (Python's MemoryError, Go's "out of memory").
//   - RLIMIT_CPU at the CPU time limit: the kernel stops the program
//     (SIGXCPU, then SIGKILL a second later).
//   - A watchdog that sums the resident memory and CPU time of every
//     process of the group from /proc every execWatchEvery, and kills the
//     group once either passes its limit: per-process limits alone let a
//     program that forks use its limit many times over.
//
// (The peak resident memory getrusage reports at exit cannot serve: a
// child started by vfork and exec keeps its parent's peak, the
// executor's, as its own.) A program that passes its memory limit with
// memory the data limit does not count (shared mappings, its stack) and
// ends within one sample is not caught; the per-process data limit still
// bounds what it allocates.
//
// A program that passes its memory limit, by any of these, or that fails
// saying an allocation failed (its runtime's words for it, in its last
// stderr lines), fails as out of memory (domain.ErrOutOfMemory), like an
// executor killed for memory: retried one size up, to the stage's
// maxMemory. One that passes its CPU time fails permanently: a retry
// would need the same CPU time again. They are enforced on Linux (Fargate,
// Lambda, local Linux hosts); elsewhere a program runs without them.

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// execWatchEvery is how often the watchdog reads the group's memory and
// CPU time.
const execWatchEvery = 100 * time.Millisecond

// Limits are one program's limits; zero: none.
type Limits struct {
	Memory  spec.Size
	CPUTime time.Duration
}

// LimitsOf are the limits of claim c's program: the attempt's size (its
// stage's, or the larger one an out-of-memory end raised it to), divided
// by divisor when it is above 0 (tests: a limit a test can pass cheaply,
// which still climbs with the attempt's size), and its stage's CPU time.
func LimitsOf(c control.Claim, divisor int) Limits {
	i := c.Task.Ref.Stage
	mem := max(c.Spec.StageMemory(i), c.Task.Memory)
	if divisor > 0 {
		mem /= spec.Size(divisor)
	}
	var cpu time.Duration
	if res := c.Spec.Stages[i].Resources; res != nil {
		cpu = time.Duration(res.CPUTime)
	}
	return Limits{Memory: mem, CPUTime: cpu}
}

// allocationFailures are what runtimes print when an allocation fails
// (the data limit refused it): a failed program whose last stderr lines
// say one of them ran out of memory.
var allocationFailures = []string{
	"MemoryError",               // Python
	"out of memory",             // Go, Node.js, many C programs
	"Cannot allocate memory",    // strerror(ENOMEM)
	"bad_alloc",                 // C++
	"OutOfMemoryError",          // Java
	"memory allocation of",      // Rust: "memory allocation of N bytes failed"
	"failed to allocate memory", // Ruby
}

// execGuard enforces one started program's limits (limits_*.go) and
// gives the verdict.
type execGuard struct {
	name string
	lim  Limits

	mu      sync.Mutex
	verdict error // the watchdog's, once it killed the group
}

func (g *execGuard) setVerdict(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.verdict == nil {
		g.verdict = err
	}
}

// memoryError is the error of a program whose processes' resident memory
// passed its limit.
func (g *execGuard) memoryError(used uint64) error {
	return &classedError{
		msg: fmt.Sprintf("exec %s: out of memory: its processes' resident memory reached %d MiB, over its %d MiB limit (the attempt's executor size; resources.memory)",
			g.name, used>>20, uint64(g.lim.Memory)>>20),
		class: domain.ErrOutOfMemory,
	}
}

// cpuError is the error of a program that used its CPU time.
func (g *execGuard) cpuError(used time.Duration, tail string) error {
	return &classedError{
		msg: fmt.Sprintf("exec %s: used %v of CPU time, its limit is %v (resources.cpuTime)%s",
			g.name, used.Round(10*time.Millisecond), g.lim.CPUTime, tail),
		class: domain.ErrPermanent,
	}
}

// exitVerdict is the limits' say on a program that ended (runErr: its
// wait's error; tail: its last stderr lines): the watchdog's verdict, its
// peak memory or CPU time over the limit, or an allocation failure it
// reported; nil when the limits had no part in how it ended.
func (g *execGuard) exitVerdict(ps *processState, runErr error, tail string) error {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	v := g.verdict
	g.mu.Unlock()
	if v != nil {
		return v
	}
	if ps == nil {
		return nil
	}
	if runErr == nil {
		return nil
	}
	// Only the CPU time limit sends SIGXCPU; a SIGKILL is its hard limit's
	// when the time is used up.
	if g.lim.CPUTime > 0 && (ps.signal == cpuLimitSignal || ps.signal == syscall.SIGKILL && ps.cpu >= g.lim.CPUTime) {
		return g.cpuError(ps.cpu, tail)
	}
	if g.lim.Memory > 0 && dataLimited {
		for _, s := range allocationFailures {
			if strings.Contains(tail, s) {
				return &classedError{
					msg:   fmt.Sprintf("exec %s: out of memory: an allocation past its %d MiB limit failed (the attempt's executor size; resources.memory)%s", g.name, uint64(g.lim.Memory)>>20, tail),
					class: domain.ErrOutOfMemory,
				}
			}
		}
	}
	return nil
}

// processState is what exitVerdict needs of an ended program.
type processState struct {
	cpu    time.Duration
	signal syscall.Signal // 0: it exited
}

func stateOf(ps *exec.Cmd) *processState {
	if ps == nil || ps.ProcessState == nil {
		return nil
	}
	st := &processState{cpu: ps.ProcessState.UserTime() + ps.ProcessState.SystemTime()}
	if ws, ok := ps.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		st.signal = ws.Signal()
	}
	return st
}
