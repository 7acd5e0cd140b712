package domain

import (
	"math"
	"time"

	sm "github.com/batchwork/batchwork/statemachine"
)

// CopyState is a task's speculative copy (spec Stage.Speculation), as its
// record keeps it. A task is copied at most once.
type CopyState struct {
	// Requested is when the sweep asked for the copy; Started when an
	// executor claimed it (zero: not yet).
	Requested, Started time.Time
	// Token, Attempt, LeaseUntil and Executor are the live copy's claim;
	// Token is empty once the copy ended (committed, failed, expired or
	// became the holder).
	Token      string
	Attempt    int
	LeaseUntil time.Time
	Executor   string
	// HolderAttempt is the attempt of the claim the copy runs beside.
	HolderAttempt int
}

// Live reports whether the copy's claim is live.
func (c *CopyState) Live() bool { return c != nil && c.Token != "" }

// view is the copy as the lifecycle rules see it.
func (c *CopyState) view() sm.CopyView {
	if c == nil {
		return sm.CopyView{}
	}
	return sm.CopyView{Requested: !c.Requested.IsZero(), Started: !c.Started.IsZero(), Token: c.Token, LeaseUntil: c.LeaseUntil,
		HolderAttempt: c.HolderAttempt}
}

// CopyMarker ends the body of a speculative copy's message:
// "job/stage/partition+copy". The claim of such a message takes the
// task's requested copy instead of the task.
const CopyMarker = "+copy"

// DurationBuckets is the number of buckets of a Durations histogram.
// Bucket 0 holds durations under DurationBase; bucket i > 0 holds
// [DurationBase·√2^(i-1), DurationBase·√2^i), and the last one everything
// longer (about 11.6 hours and up). Bounds √2 apart put the median within
// ±19% of the truth, enough to tell a 1.5x straggler.
const DurationBuckets = 48

// DurationBase is the upper bound of the first duration bucket.
const DurationBase = 100 * time.Millisecond

// DurationBucket is the bucket of d.
func DurationBucket(d time.Duration) int {
	if d < DurationBase {
		return 0
	}
	b := 1 + int(math.Floor(2*math.Log2(float64(d)/float64(DurationBase))))
	return min(b, DurationBuckets-1)
}

// bucketBounds is bucket b's duration range.
func bucketBounds(b int) (lo, hi time.Duration) {
	if b == 0 {
		return 0, DurationBase
	}
	lo = time.Duration(float64(DurationBase) * math.Pow(math.Sqrt2, float64(b-1)))
	return lo, time.Duration(float64(lo) * math.Sqrt2)
}

// Durations is a histogram of the durations of a stage's committed
// attempts (claim to commit), summed from its completion counter shards:
// each commit adds one to its bucket in the commit's transaction.
type Durations struct {
	Buckets [DurationBuckets]int64
}

// Count is how many committed attempts the histogram holds.
func (d Durations) Count() int64 {
	var n int64
	for _, c := range d.Buckets {
		n += c
	}
	return n
}

// Quantile estimates the q-quantile (0 < q <= 1) of the durations,
// interpolating geometrically inside its bucket; zero when empty.
func (d Durations) Quantile(q float64) time.Duration {
	n := d.Count()
	if n == 0 {
		return 0
	}
	rank := q * float64(n)
	var seen float64
	for b, c := range d.Buckets {
		if c == 0 {
			continue
		}
		if seen+float64(c) >= rank {
			lo, hi := bucketBounds(b)
			f := (rank - seen) / float64(c)
			if b == 0 {
				return time.Duration(f * float64(hi))
			}
			return time.Duration(float64(lo) * math.Pow(float64(hi)/float64(lo), f))
		}
		seen += float64(c)
	}
	_, hi := bucketBounds(DurationBuckets - 1)
	return hi
}

// Median is Quantile(0.5).
func (d Durations) Median() time.Duration { return d.Quantile(0.5) }
