package domain

// A large stage's tasks are queued by several chains at once, one per
// segment of SegmentTasks partitions (shared/control/stages, segments.go):
// these say where each chain stands.

// SegmentCount is how many segments the stage's materialization has: 1
// for a stage queued by one chain.
func (s Stage) SegmentCount() int {
	if s.SegmentTasks <= 0 || s.Total <= s.SegmentTasks {
		return 1
	}
	return (s.Total + s.SegmentTasks - 1) / s.SegmentTasks
}

// SegmentRange is the partitions lo..hi-1 of segment k.
func (s Stage) SegmentRange(k int) (lo, hi int) {
	if s.SegmentCount() == 1 {
		return 0, s.Total
	}
	lo = k * s.SegmentTasks
	return lo, min(lo+s.SegmentTasks, s.Total)
}

// SegmentNext is the partition segment k's chain has reached: every
// partition of the segment below it was written and sent.
func (s Stage) SegmentNext(k int) int {
	if k == 0 {
		return s.Enqueued
	}
	if n, ok := s.Segments[k]; ok {
		return n
	}
	lo, _ := s.SegmentRange(k)
	return lo
}

// SegmentDone says whether segment k is all written and sent.
func (s Stage) SegmentDone(k int) bool {
	_, hi := s.SegmentRange(k)
	return s.SegmentNext(k) >= hi
}

// AllSent says whether every segment is written and sent (the stage may
// not yet be marked materialized).
func (s Stage) AllSent() bool {
	if s.Materialized {
		return true
	}
	for k := range s.SegmentCount() {
		if !s.SegmentDone(k) {
			return false
		}
	}
	return true
}

// Sent says whether partition p's task was written and its message sent:
// its segment's chain has passed it, or the stage is materialized.
func (s Stage) Sent(p int) bool {
	if p < 0 {
		return false
	}
	if s.Materialized {
		return p < s.Total
	}
	k := 0
	if s.SegmentCount() > 1 {
		k = min(p/s.SegmentTasks, s.SegmentCount()-1)
	}
	return p < s.SegmentNext(k)
}

// SegmentStart is where segment k (k >= 1) of a stage of total tasks
// split into segments of size starts counting, the stage's one chain
// having sent enqueued: its first partition, or enqueued if that chain
// got past it, or its end if past that.
func SegmentStart(enqueued, total, k, size int) int {
	lo := k * size
	hi := min(lo+size, total)
	return min(max(enqueued, lo), hi)
}
