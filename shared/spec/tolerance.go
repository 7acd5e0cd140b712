package spec

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// Failure-tolerance settings of a stage (issue 13): how long a task may
// run, how many of its tasks may fail and how many records may be
// rejected before the job fails, speculative copies of stragglers, and
// the executor size it needs. Each is optional; the zero value keeps the
// behaviour of a spec without it.

// Tolerance is how many of a stage's tasks may fail for good while the job
// still succeeds. Exactly one of Count and Percent is set; Percent is of
// the stage's task total.
type Tolerance struct {
	Count   int     `json:"count,omitempty"`
	Percent float64 `json:"percent,omitempty"`
}

// Allowed is how many failed tasks a stage of total tasks tolerates.
func (t *Tolerance) Allowed(total int) int {
	switch {
	case t == nil:
		return 0
	case t.Percent > 0:
		// Floor: "10%" of 15 tasks tolerates 1 failure, never 2. In
		// integers of millionths of a percent: in binary floating point
		// 18.4 * 375 / 100 is 68.999…, which would lose a whole task.
		micro := int64(math.Round(t.Percent * 1e6))
		return int(micro * int64(total) / 100e6)
	}
	return t.Count
}

// Speculation turns on speculative copies of a stage's stragglers: once
// Quantile of its tasks have committed, a task running longer than
// Multiplier times their median duration gets a copy, with at most
// MaxCopies copies running at once. The first attempt to commit wins.
type Speculation struct {
	Quantile   float64 `json:"quantile,omitempty"`
	Multiplier float64 `json:"multiplier,omitempty"`
	MaxCopies  int     `json:"maxCopies,omitempty"`
}

// Resources is the executor size a stage's tasks need. An attempt that
// runs out of memory retries on the next size up (ExecutorSizes), up to
// MaxMemory. An exec stage's program runs under the attempt's size as its
// memory limit, and under CPUTime, when set, as the CPU time (user and
// system, all its processes) it may use; past it the attempt fails
// permanently.
type Resources struct {
	Memory    Size     `json:"memory,omitempty"`
	MaxMemory Size     `json:"maxMemory,omitempty"`
	CPUTime   Duration `json:"cpuTime,omitempty"`
}

// Bounds of an exec program's CPU time (Resources.CPUTime): whole seconds,
// as the kernel's limit counts them.
const (
	MinCPUTime = Duration(time.Second)
	MaxCPUTime = MaxDeadline
)

// Defaults and limits of the failure-tolerance settings.
const (
	MinTimeout                  = Duration(time.Second)
	MaxTimeout                  = MaxDeadline
	DefaultSpeculationQuantile  = 0.75
	DefaultSpeculationMultipler = 1.5
	DefaultSpeculativeCopies    = 16
	MaxSpeculativeCopies        = 1_000
	MaxSpeculationMultiplier    = 100.0
	MaxBadRecordsLimit          = 1_000_000
)

// ExecutorSizes are the executor memory sizes a stage may ask for, in
// ascending order: Lambda's memory setting in MiB steps up to its 10,240
// MiB maximum. The construct deploys the ones its props allow.
var ExecutorSizes = []Size{1 << 30, 2 << 30, 4 << 30, 8 << 30, 10 << 30}

// DefaultExecutorSize is the size of a stage without resources.
const DefaultExecutorSize = Size(1 << 30)

// NextSize is the executor size above s, or false at the largest.
func NextSize(s Size) (Size, bool) {
	for _, z := range ExecutorSizes {
		if z > s {
			return z, true
		}
	}
	return 0, false
}

// StageSpeculation is stage i's speculation with its defaults filled in,
// or nil when the stage does not speculate.
func (j *Job) StageSpeculation(i int) *Speculation {
	s := j.Stages[i].Speculation
	if s == nil {
		return nil
	}
	out := *s
	if out.Quantile == 0 {
		out.Quantile = DefaultSpeculationQuantile
	}
	if out.Multiplier == 0 {
		out.Multiplier = DefaultSpeculationMultipler
	}
	if out.MaxCopies == 0 {
		out.MaxCopies = DefaultSpeculativeCopies
	}
	return &out
}

// StageMemory is stage i's starting executor size.
func (j *Job) StageMemory(i int) Size {
	if r := j.Stages[i].Resources; r != nil && r.Memory != 0 {
		return r.Memory
	}
	return DefaultExecutorSize
}

// StageMaxMemory is the largest executor size stage i's retries may use.
func (j *Job) StageMaxMemory(i int) Size {
	if r := j.Stages[i].Resources; r != nil && r.MaxMemory != 0 {
		return r.MaxMemory
	}
	return j.StageMemory(i)
}

func checkTolerance(errs *errorList, p string, s Stage) {
	if s.Timeout != 0 && (s.Timeout < MinTimeout || s.Timeout > MaxTimeout) {
		errs.add(p+".timeout", fmt.Sprintf("must be between %v and %v", MinTimeout, MaxTimeout))
	}
	if t := s.ToleratedFailures; t != nil {
		fp := p + ".toleratedFailures"
		switch {
		case t.Count != 0 && t.Percent != 0:
			errs.add(fp, "give count (tasks) or percent (of the stage's tasks), not both")
		case t.Count < 0 || t.Count > MaxPartitions:
			errs.add(fp+".count", fmt.Sprintf("must be between 0 and %d", MaxPartitions))
		case t.Percent < 0 || t.Percent > 100:
			errs.add(fp+".percent", "must be between 0 and 100")
		}
	}
	if s.MaxBadRecords < 0 || s.MaxBadRecords > MaxBadRecordsLimit {
		errs.add(p+".maxBadRecords", fmt.Sprintf("must be between 0 and %d", MaxBadRecordsLimit))
	}
	if sp := s.Speculation; sp != nil {
		fp := p + ".speculation"
		if sp.Quantile < 0 || sp.Quantile > 1 {
			errs.add(fp+".quantile", "must be between 0 and 1 (the share of the stage's tasks committed before copies start); 0 means 0.75")
		}
		if sp.Multiplier != 0 && (sp.Multiplier < 1 || sp.Multiplier > MaxSpeculationMultiplier) {
			errs.add(fp+".multiplier", fmt.Sprintf("must be between 1 and %v (times the median task duration); 0 means 1.5", MaxSpeculationMultiplier))
		}
		if sp.MaxCopies < 0 || sp.MaxCopies > MaxSpeculativeCopies {
			errs.add(fp+".maxCopies", fmt.Sprintf("must be between 1 and %d, or 0 for %d", MaxSpeculativeCopies, DefaultSpeculativeCopies))
		}
	}
	if r := s.Resources; r != nil {
		fp := p + ".resources"
		if r.Memory != 0 && !isExecutorSize(r.Memory) {
			errs.add(fp+".memory", "must be one of "+sizeList())
		}
		if r.MaxMemory != 0 && !isExecutorSize(r.MaxMemory) {
			errs.add(fp+".maxMemory", "must be one of "+sizeList())
		} else if r.MaxMemory != 0 && r.MaxMemory < max(r.Memory, DefaultExecutorSize) {
			errs.add(fp+".maxMemory", "must be at least memory")
		}
		switch {
		case r.CPUTime == 0:
		case s.Exec == nil:
			errs.add(fp+".cpuTime", "applies to exec stages only (the CPU time their program may use)")
		case r.CPUTime < MinCPUTime || r.CPUTime > MaxCPUTime || time.Duration(r.CPUTime)%time.Second != 0:
			errs.add(fp+".cpuTime", fmt.Sprintf("must be whole seconds between %v and %v", MinCPUTime, MaxCPUTime))
		}
	}
}

func isExecutorSize(s Size) bool {
	for _, z := range ExecutorSizes {
		if z == s {
			return true
		}
	}
	return false
}

func sizeList() string {
	out := ""
	for i, z := range ExecutorSizes {
		if i > 0 {
			out += ", "
		}
		out += strconv.FormatInt(int64(z)>>30, 10) + "GiB"
	}
	return out
}

// toleranceKey decodes a stage key of this file's settings; false when key
// is not one of them.
func (d *decoder) toleranceKey(key string, v *yaml.Node, p string, s *Stage) bool {
	switch key {
	case "timeout":
		s.Timeout = d.duration(v, p)
	case "maxBadRecords":
		s.MaxBadRecords = d.integer(v, p)
	case "toleratedFailures":
		if isNull(v) {
			return true
		}
		t := new(Tolerance)
		d.object(v, p, func(key string, v *yaml.Node, p string) bool {
			switch key {
			case "count":
				t.Count = d.integer(v, p)
			case "percent":
				t.Percent = d.number(v, p)
			default:
				return false
			}
			return true
		})
		s.ToleratedFailures = t
	case "speculation":
		if isNull(v) {
			return true
		}
		sp := new(Speculation)
		d.object(v, p, func(key string, v *yaml.Node, p string) bool {
			switch key {
			case "quantile":
				sp.Quantile = d.number(v, p)
			case "multiplier":
				sp.Multiplier = d.number(v, p)
			case "maxCopies":
				sp.MaxCopies = d.integer(v, p)
			default:
				return false
			}
			return true
		})
		s.Speculation = sp
	case "resources":
		if isNull(v) {
			return true
		}
		r := new(Resources)
		d.object(v, p, func(key string, v *yaml.Node, p string) bool {
			switch key {
			case "memory":
				r.Memory = d.size(v, p)
			case "maxMemory":
				r.MaxMemory = d.size(v, p)
			case "cpuTime":
				r.CPUTime = d.duration(v, p)
			default:
				return false
			}
			return true
		})
		s.Resources = r
	default:
		return false
	}
	return true
}

func (d *decoder) number(n *yaml.Node, path string) float64 {
	r := d.scalar(n, path, "must be a number", "!!int", "!!float")
	if r == nil {
		return 0
	}
	var v float64
	if err := r.Decode(&v); err != nil {
		d.fail(path, n, "must be a number")
	}
	return v
}

func (d *decoder) boolean(n *yaml.Node, path string) bool {
	r := d.scalar(n, path, "must be true or false", "!!bool")
	if r == nil {
		return false
	}
	var v bool
	if err := r.Decode(&v); err != nil {
		d.fail(path, n, "must be true or false")
	}
	return v
}
