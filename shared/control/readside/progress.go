package readside

import (
	"context"
	"math"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
)

const (
	// rateEvery is the shortest interval between two rate samples of a
	// stage, however many clients watch it: at most one small write per
	// running stage per rateEvery.
	rateEvery = 2 * time.Second
	// rateTau is the time constant of the moving average: a change in
	// throughput shows at 63% after rateTau.
	rateTau = 20 * time.Second
)

// Rate is a stage's smoothed throughput, per second.
type Rate struct {
	TaskRate, RecordRate float64
}

// nextSample advances a stage's rate sample to now. It returns the new
// sample, whether it changed (and should be stored), and the rate to show.
// The average is exponential in time, not in samples, so irregular polling
// weighs each interval by its length:
//
//	rate += (1 - e^(-dt/tau)) * (instant - rate)
//
// Before a first interval is complete the rate is the average since the
// stage started, which is also the average's starting point.
func nextSample(prev *domain.RateSample, started time.Time, committed int, recordsIn int64, now time.Time) (domain.RateSample, bool, Rate, bool) {
	cur := domain.RateSample{At: now, Committed: committed, RecordsIn: recordsIn, TaskRate: -1, RecordRate: -1}
	sinceStart := now.Sub(started).Seconds()
	avg := func() (Rate, bool) {
		if started.IsZero() || sinceStart <= 0 || committed == 0 {
			return Rate{}, false
		}
		return Rate{TaskRate: float64(committed) / sinceStart, RecordRate: float64(recordsIn) / sinceStart}, true
	}
	if prev == nil {
		r, ok := avg()
		if ok {
			cur.TaskRate, cur.RecordRate = r.TaskRate, r.RecordRate
		}
		return cur, true, r, ok
	}
	dt := now.Sub(prev.At)
	if dt < rateEvery {
		if prev.TaskRate >= 0 {
			return *prev, false, Rate{TaskRate: prev.TaskRate, RecordRate: prev.RecordRate}, true
		}
		r, ok := avg()
		return *prev, false, r, ok
	}
	secs := dt.Seconds()
	inst := Rate{
		TaskRate:   math.Max(float64(committed-prev.Committed), 0) / secs,
		RecordRate: math.Max(float64(recordsIn-prev.RecordsIn), 0) / secs,
	}
	base := Rate{TaskRate: prev.TaskRate, RecordRate: prev.RecordRate}
	if prev.TaskRate < 0 {
		r, ok := avg()
		if !ok {
			r = inst
		}
		base = r
	}
	alpha := 1 - math.Exp(-secs/rateTau.Seconds())
	r := Rate{
		TaskRate:   base.TaskRate + alpha*(inst.TaskRate-base.TaskRate),
		RecordRate: base.RecordRate + alpha*(inst.RecordRate-base.RecordRate),
	}
	cur.TaskRate, cur.RecordRate = r.TaskRate, r.RecordRate
	return cur, true, r, true
}

// stageRate returns a running stage's smoothed rate, advancing its stored
// sample when the last one is old enough. Concurrent readers race on a
// conditional write; the loser's sample is dropped, which only means the
// interval is counted by the winner. A failed write is logged, never
// returned: the status read must not fail because a cache could not be
// refreshed.
func (r *Reader) stageRate(ctx context.Context, st domain.StageStats, now time.Time) (Rate, bool) {
	if !st.Materialized || st.Total == 0 || st.Counters.Missing > 0 {
		return Rate{}, false
	}
	next, changed, rate, ok := nextSample(st.Sample, st.Started, st.Counters.Committed, st.Counters.RecordsIn, now)
	if changed {
		var prev time.Time
		if st.Sample != nil {
			prev = st.Sample.At
		}
		if _, err := r.store.StagePutRateSample(ctx, st.Job, st.Index, prev, next); err != nil {
			r.log.Warn("store rate sample", "job_id", st.Job, "stage", st.Name, "err", err)
		}
	}
	return rate, ok
}
