// Package metrics writes Batchwork's own metrics in CloudWatch Embedded
// Metric Format (EMF): JSON lines on stdout, which Lambda and the Fargate
// awslogs driver ship to CloudWatch Logs, where the metrics are extracted.
// No PutMetricData request is made, so a metric costs nothing per datum,
// only its storage as a custom metric.
//
// A Recorder aggregates in process and writes when flushed: every few
// seconds on a long-running host (Run), and at the end of each Lambda
// invocation (Flush). A busy executor writes a few lines a minute, not
// one per task: counters are summed, and durations are kept as arrays of
// values (one EMF line carries up to 100 per metric; CloudWatch computes
// the statistics and percentiles over them).
//
// Dimensions are bounded on purpose: {Stack} and {Stack, Priority} for
// tasks (Priority is one of high, normal, low), {Stack} for jobs, and
// {Stack} and {Stack, Kind} for the sweep's repairs (Kind is one of
// control.Repairs). CloudWatch bills every distinct combination of metric
// name and dimension values as one custom metric, for as long as it gets
// data: a job, task or executor id as a dimension would create new metrics
// for every job, without bound, and dashboards and alarms could not use
// them anyway. Ids belong in the log lines (Logs Insights queries them),
// never in dimensions; the recorder has no way to set one.
package metrics

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// Namespace is the CloudWatch namespace of every Batchwork metric.
const Namespace = "Batchwork"

// EnvStack names the stack in the metrics' Stack dimension. The construct
// sets it on every function and on the Fargate executor; unset (the local
// runner, tests), no metrics are written.
const EnvStack = "BATCHWORK_METRICS_STACK"

// FlushEvery is how often a long-running host writes its metrics.
const FlushEvery = 10 * time.Second

// The metrics' names.
const (
	TasksClaimed   = "TasksClaimed"   // Count, per {Stack}, {Stack, Priority}
	TasksCommitted = "TasksCommitted" // Count
	TasksRetried   = "TasksRetried"   // Count: an attempt failed and the task will run again
	TasksFailed    = "TasksFailed"    // Count: a task failed for good (its last attempt)
	ReadyToClaimed = "ReadyToClaimedLatency"
	TaskDuration   = "TaskDuration"  // Milliseconds, from claim to commit
	CommitLatency  = "CommitLatency" // Milliseconds, of the commit call
	JobsFailed     = "JobsFailed"    // Count, per {Stack}: a job ended FAILED
	SweepRepairs   = "SweepRepairs"  // Count, per {Stack}, {Stack, Kind}
)

// Dimension names.
const (
	DimStack    = "Stack"
	DimPriority = "Priority"
	DimKind     = "Kind"
)

// Units (CloudWatch's standard units).
const (
	unitCount = "Count"
	unitMs    = "Milliseconds"
)

// maxValues is how many values one EMF line may carry per metric.
const maxValues = 100

// group is what is aggregated under one set of dimension values.
type group struct {
	dims   string // "" (stack only), DimPriority or DimKind
	value  string // the dimension's value
	counts map[string]float64
	values map[string][]float64
	order  []string // metric names, as first recorded, for stable output
}

// Recorder aggregates metrics and writes them as EMF. Its methods are
// safe for concurrent use, and a nil *Recorder records nothing.
type Recorder struct {
	mu     sync.Mutex
	w      io.Writer
	stack  string
	now    func() time.Time
	groups map[[2]string]*group
}

// New returns a recorder writing to w for stack.
func New(w io.Writer, stack string) *Recorder {
	return &Recorder{w: w, stack: stack, now: time.Now, groups: map[[2]string]*group{}}
}

// FromEnv returns a recorder on stdout when EnvStack is set, else nil.
func FromEnv(getenv func(string) string) *Recorder {
	stack := getenv(EnvStack)
	if stack == "" {
		return nil
	}
	return New(os.Stdout, stack)
}

// SetClock replaces the clock stamping flushed lines (tests).
func (r *Recorder) SetClock(now func() time.Time) { r.now = now }

// priority bounds the Priority dimension to the three classes.
func priority(p spec.Priority) string {
	switch p {
	case spec.PriorityHigh, spec.PriorityLow:
		return string(p)
	}
	return string(spec.PriorityNormal)
}

// kind bounds the Kind dimension to control.Repairs.
func kind(k control.Repair) string {
	if slices.Contains(control.Repairs, k) {
		return string(k)
	}
	return "Other"
}

func (r *Recorder) group(dims, value string) *group {
	k := [2]string{dims, value}
	g := r.groups[k]
	if g == nil {
		g = &group{dims: dims, value: value, counts: map[string]float64{}, values: map[string][]float64{}}
		r.groups[k] = g
	}
	return g
}

func (g *group) seen(name string) {
	if !slices.Contains(g.order, name) {
		g.order = append(g.order, name)
	}
}

func (r *Recorder) add(dims, value, name string, n float64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.group(dims, value)
	g.seen(name)
	g.counts[name] += n
}

func (r *Recorder) observe(dims, value, name string, d time.Duration) {
	if r == nil {
		return
	}
	ms := math.Round(float64(d.Microseconds())/10) / 100 // milliseconds, to 0.01
	r.mu.Lock()
	defer r.mu.Unlock()
	g := r.group(dims, value)
	g.seen(name)
	g.values[name] = append(g.values[name], max(ms, 0))
}

// TaskClaimed counts a granted claim.
func (r *Recorder) TaskClaimed(p spec.Priority) { r.add(DimPriority, priority(p), TasksClaimed, 1) }

// TaskCommitted counts a commit, with the attempt's duration from claim to
// commit (0: unknown, not recorded) and the commit call's latency.
func (r *Recorder) TaskCommitted(p spec.Priority, duration, commit time.Duration) {
	r.add(DimPriority, priority(p), TasksCommitted, 1)
	if duration > 0 {
		r.observe(DimPriority, priority(p), TaskDuration, duration)
	}
	r.observe(DimPriority, priority(p), CommitLatency, commit)
}

// TaskRetried counts an attempt that failed with attempts left.
func (r *Recorder) TaskRetried(p spec.Priority) { r.add(DimPriority, priority(p), TasksRetried, 1) }

// TaskFailed counts a task that failed for good.
func (r *Recorder) TaskFailed(p spec.Priority) { r.add(DimPriority, priority(p), TasksFailed, 1) }

// JobFailed counts a job that ended FAILED.
func (r *Recorder) JobFailed() { r.add("", "", JobsFailed, 1) }

// Repaired counts n repairs of a kind by the sweep.
func (r *Recorder) Repaired(k control.Repair, n int) {
	if n > 0 {
		r.add(DimKind, kind(k), SweepRepairs, float64(n))
	}
}

// ReadyToClaimed records how long a task's message waited, from sent to
// claimed (the executor host's OnClaim hook).
func (r *Recorder) ReadyToClaimed(p spec.Priority, d time.Duration) {
	r.observe(DimPriority, priority(p), ReadyToClaimed, d)
}

var _ control.Metrics = (*Recorder)(nil)

// Document is one EMF line.
type Document map[string]any

// Flush writes what was recorded since the last flush, one line per
// dimension value (more when a metric has over 100 values), and forgets
// it. A write error drops the lines: metrics must never stop a task.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	groups := r.groups
	r.groups = map[[2]string]*group{}
	now := r.now()
	r.mu.Unlock()
	var buf bytes.Buffer
	keys := make([][2]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [2]string) int {
		if c := cmpStr(a[0], b[0]); c != 0 {
			return c
		}
		return cmpStr(a[1], b[1])
	})
	for _, k := range keys {
		for _, d := range groups[k].documents(r.stack, now) {
			line, err := json.Marshal(d)
			if err != nil {
				return err
			}
			buf.Write(line)
			buf.WriteByte('\n')
		}
	}
	if buf.Len() == 0 {
		return nil
	}
	r.mu.Lock() // one writer at a time: lines never interleave
	defer r.mu.Unlock()
	_, err := r.w.Write(buf.Bytes())
	return err
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// documents renders a group: counts in the first line, values in chunks
// of at most maxValues.
func (g *group) documents(stack string, now time.Time) []Document {
	dimSets := [][]string{{DimStack}}
	if g.dims != "" {
		dimSets = append(dimSets, []string{DimStack, g.dims})
	}
	var docs []Document
	for i := 0; ; i++ {
		d := Document{DimStack: stack}
		if g.dims != "" {
			d[g.dims] = g.value
		}
		var defs []map[string]string
		for _, name := range g.order {
			if n, ok := g.counts[name]; ok && i == 0 {
				d[name] = n
				defs = append(defs, map[string]string{"Name": name, "Unit": unitCount})
			}
			if vs := g.values[name]; len(vs) > i*maxValues {
				d[name] = vs[i*maxValues : min(len(vs), (i+1)*maxValues)]
				defs = append(defs, map[string]string{"Name": name, "Unit": unitMs})
			}
		}
		if len(defs) == 0 {
			return docs
		}
		d["_aws"] = map[string]any{
			"Timestamp": now.UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace": Namespace, "Dimensions": dimSets, "Metrics": defs,
			}},
		}
		docs = append(docs, d)
	}
}

// Run flushes every interval until ctx ends, then once more.
func (r *Recorder) Run(done <-chan struct{}, every time.Duration) {
	if r == nil {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-done:
			_ = r.Flush()
			return
		case <-tick.C:
			_ = r.Flush()
		}
	}
}
