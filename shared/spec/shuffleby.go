package spec

import "fmt"

// How a shuffle assigns keys to partitions (Shuffle.By).
const (
	// ShuffleByHash sends a key to the partition its hash picks (the
	// default, also when By is empty).
	ShuffleByHash = "hash"
	// ShuffleByRange sends a key to the partition whose key range holds
	// it: each map task writes its records sorted by key with a sample of
	// its keys, the reducers draw the same boundaries from the samples,
	// and each reducer reads its records merged in key order, so the
	// partitions in order are totally ordered (docs/job-spec.md, "Range
	// partitioning and sorting"; internal/executor/rangeshuffle).
	ShuffleByRange = "range"
)

// Ranged reports whether the shuffle partitions by key range.
func (s *Shuffle) Ranged() bool { return s != nil && s.By == ShuffleByRange }

// checkShuffleBy checks stage i's shuffle.by, given the stages that read
// its shuffle. A lambda function writes its own output objects and reads
// whole objects, neither of which a range shuffle's sorted runs are, so
// neither side of a range shuffle may be a lambda stage.
func (j *Job) checkShuffleBy(errs *errorList, i int, down []int) {
	s := j.Stages[i]
	if s.Shuffle == nil {
		return
	}
	p := stagePath(i) + ".shuffle.by"
	switch s.Shuffle.By {
	case "", ShuffleByHash:
		return
	case ShuffleByRange:
	default:
		errs.add(p, fmt.Sprintf("%q is not a partitioning; use %q (the default) or %q", s.Shuffle.By, ShuffleByHash, ShuffleByRange))
		return
	}
	if s.Lambda != "" {
		errs.add(p, "a lambda stage cannot write a range shuffle (its function writes its own objects, not sorted runs); use a task or exec stage, or by: hash")
	}
	for _, d := range down {
		// Each range shuffle draws its own boundaries from its own
		// samples, so partition p of two range shuffles holds different
		// key ranges and a join of them would miss matches.
		if len(j.ShuffleSources(d)) > 1 {
			errs.add(p, fmt.Sprintf("stage %q joins this shuffle with another; a join reads partition p of each shuffle, which only hash partitioning makes hold the same keys; use by: hash", j.Stages[d].Name))
		}
		if j.Stages[d].Lambda != "" {
			errs.add(p, fmt.Sprintf("stage %q, a lambda stage, reads this shuffle; a lambda function cannot read a range shuffle (it reads whole objects, not merged sorted runs); use a task or exec stage, or by: hash",
				j.Stages[d].Name))
		}
	}
}
