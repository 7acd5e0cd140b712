package spec

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// Skew is a reducing stage's `skew:`: its hot shuffle partitions are
// split over several tasks (shared/skew plans them; docs/job-spec.md,
// Skew). Combinable: the function reduces its own key<TAB>value output
// (a sum). Join: the stage joins several shuffles and its output for a key
// depends on matching pairs alone, so the pieces of the largest side may
// each be joined with all of the other sides' partition.
type Skew struct {
	Combinable bool `json:"combinable,omitempty"`
	Join       bool `json:"join,omitempty"`
	// Threshold: a partition is hot when over Threshold times the median
	// partition (0: DefaultSkewThreshold) and over MinBytes (0:
	// DefaultSkewMinBytes).
	Threshold int  `json:"threshold,omitempty"`
	MinBytes  Size `json:"minBytes,omitempty"`
}

// Defaults: 4 times the median and 64 MiB (less is read fast by one task).
const (
	DefaultSkewThreshold      = 4
	DefaultSkewMinBytes  Size = 64 << 20
)

func (d *decoder) skew(n *yaml.Node, path string) *Skew {
	if isNull(n) {
		return nil
	}
	s := new(Skew)
	d.object(n, path, func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "combinable":
			s.Combinable = d.boolean(v, p)
		case "join":
			s.Join = d.boolean(v, p)
		case "threshold":
			s.Threshold = d.integer(v, p)
		case "minBytes":
			s.MinBytes = d.size(v, p)
		default:
			return false
		}
		return true
	})
	return s
}

// checkSkew checks stage i's skew: a task or exec stage reading hash
// shuffles, saying how its pieces make the partition's result.
func (j *Job) checkSkew(errs *errorList, i int) {
	st := j.Stages[i]
	s := st.Skew
	if s == nil {
		return
	}
	p := stagePath(i) + ".skew"
	srcs := j.ShuffleSources(i)
	switch {
	case len(srcs) == 0:
		errs.add(p, "only a stage that reads a shuffle can split its skewed partitions")
		return
	case st.Lambda != "":
		errs.add(p, "a lambda stage reads whole objects of its shuffle, which cannot be split; use a task or exec stage")
	case s.Combinable && s.Join:
		errs.add(p, "set one of combinable (a reduction over one shuffle) and join (a join of several)")
	case len(srcs) == 1 && !s.Combinable:
		errs.add(p+".combinable", "must be true: a stage reading one shuffle splits a partition only if its function can reduce its own output (docs/job-spec.md, Skew)")
	case len(srcs) > 1 && !s.Join:
		errs.add(p+".join", "must be true: a stage joining several shuffles splits a partition only if its output for a key depends on matching pairs alone (docs/job-spec.md, Skew)")
	}
	for _, src := range srcs {
		if j.Stages[src].Shuffle.Ranged() {
			errs.add(p, fmt.Sprintf("stage %q's shuffle is by range, whose partitions are key ranges drawn by the reducers; skew splits hash partitions only", j.Stages[src].Name))
		}
	}
	if s.Combinable && (st.Shuffle != nil || st.Output != nil || st.ToleratedFailures != nil) {
		errs.add(p+".combinable", "its pieces' outputs are reduced again as lines: the stage cannot shuffle, set output or tolerate failures")
	}
	if s.Threshold != 0 && (s.Threshold < 2 || s.Threshold > 1000) {
		errs.add(p+".threshold", "must be between 2 and 1000 (times the median partition)")
	}
	if s.MinBytes < 0 {
		errs.add(p+".minBytes", "must not be negative")
	}
}
