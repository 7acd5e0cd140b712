// Package runs keeps the throughput job's repeated runs and picks the one
// the bench's verdicts read.
//
// The bench's two cores are a virtual machine's: for seconds at a time
// its neighbours slow the runner, DynamoDB Local and moto alike (the CPU
// each spends a task rises by a third together while the requests stay
// the same), so one run of a six-second job can land in such a stretch
// while the emulator probes before and after it do not. The job is
// therefore run a few times and the run with the median rate is the one
// reported; every run's figures are printed beside it.
package runs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Run is one measured run of the throughput job.
type Run struct {
	Tasks    int
	Elapsed  time.Duration   // submit to the job's end
	CPU      time.Duration   // this process's CPU over the job
	Requests float64         // the runner's requests for the job, as the verdict counts them
	Claims   []time.Duration // each claim's time since the submit, in order
}

// Rate is the run's end-to-end rate: tasks over submit to end.
func (r Run) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Tasks) / r.Elapsed.Seconds()
}

// Sustained is the rate of the claims between the first and the last
// tenth of them: the job's rate once it runs, without its start (the
// submit, the first chunk queued, the executors' first receives) and its
// end (the fan-out's last counts at the executors' next delete round, the
// fan-in stage, the job's end). The emulator floor is a rate of that kind
// (the mix probe's levels run at full concurrency from their first
// second), so this is the rate the floor is compared with. ok is false
// with too few claims to tell.
func (r Run) Sustained() (rate float64, ok bool) {
	n := len(r.Claims)
	if n < 20 {
		return 0, false
	}
	lo, hi := n/10, n-1-n/10
	span := r.Claims[hi] - r.Claims[lo]
	if span <= 0 {
		return 0, false
	}
	return float64(hi-lo) / span.Seconds(), true
}

// CPUPerTask is the run's CPU a task.
func (r Run) CPUPerTask() time.Duration {
	if r.Tasks == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Tasks)
}

// Median is the index of the run with the median rate (the slower of the
// middle two with an even count), or -1 with no runs.
func Median(rs []Run) int {
	if len(rs) == 0 {
		return -1
	}
	idx := make([]int, len(rs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(rs[a].Rate(), rs[b].Rate()) })
	return idx[(len(idx)-1)/2]
}

// Describe is one line of every run's rate, sustained rate, CPU and
// requests a task, the reported one marked.
func Describe(rs []Run, reported int) string {
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString("; ")
		}
		s, _ := r.Sustained()
		fmt.Fprintf(&b, "%d: %.0f tasks/s (sustained %.0f), %.0f µs, %.2f requests a task", i+1, r.Rate(), s,
			float64(r.CPUPerTask().Microseconds()), r.Requests/float64(max(r.Tasks, 1)))
		if i == reported {
			b.WriteString(" (reported: the median rate)")
		}
	}
	return b.String()
}

// Timeline records claim times for the run under way. Its methods are
// safe for concurrent use (the executor's claim hook calls Claimed from
// every slot).
type Timeline struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

// Start begins a run's timeline, dropping the last run's.
func (t *Timeline) Start() {
	t.mu.Lock()
	t.start, t.at = time.Now(), nil
	t.mu.Unlock()
}

// Claimed records a claim now. Claims before the first Start are not kept.
func (t *Timeline) Claimed() {
	t.mu.Lock()
	if !t.start.IsZero() {
		t.at = append(t.at, time.Since(t.start))
	}
	t.mu.Unlock()
}

// Take returns the run's claim times in order and ends the run.
func (t *Timeline) Take() []time.Duration {
	t.mu.Lock()
	at := t.at
	t.start, t.at = time.Time{}, nil
	t.mu.Unlock()
	slices.Sort(at)
	return at
}
