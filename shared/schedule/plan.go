package schedule

import (
	"errors"
	"fmt"
	"time"
)

// Catch-up limits.
const (
	// DefaultGrace is how late a firing may be and still count as on time.
	// It is well above a sweep's normal lateness (a minute or so) and far
	// below any real downtime.
	DefaultGrace = 5 * time.Minute
	// MaxGrace bounds the grace and with it the on-time firings of one plan
	// (at most one per minute of grace).
	MaxGrace = time.Hour
	// MaxMissedListed is how many missed times a plan lists; the rest are
	// summarised by First, Last and Count.
	MaxMissedListed = 100
	// MaxMissedCounted bounds the walk that counts a cron schedule's
	// missed times. A rate's count is arithmetic and always exact.
	MaxMissedCounted = 10_000
)

// PlanParams is the input of Schedule.Plan.
type PlanParams struct {
	// LastFired is the cursor: the latest scheduled time already handled
	// (fired, or recorded as missed), as returned in Plan.Cursor. Zero
	// when the schedule has never fired; it then starts at its start or
	// creation. Resuming a paused schedule must set it to the resume time,
	// or the paused stretch is planned as missed.
	LastFired time.Time
	// Now is the planning time.
	Now time.Time
	// Grace is how late a firing may be and still count as on time; zero
	// means DefaultGrace.
	Grace time.Duration
}

// Plan says what to do for a schedule now.
type Plan struct {
	// Fire lists the firings to create now, oldest first. Each becomes a
	// job whose idempotency key is FiringKey(id, Scheduled).
	Fire []Firing
	// Missed describes the scheduled times that passed unfired for longer
	// than the grace, under either policy.
	Missed Missed
	// Cursor is the new LastFired: the latest scheduled time this plan
	// handled (unchanged when nothing was due). Store it with a condition
	// on the old value, so that of two racing sweeps only one advances it.
	Cursor time.Time
	// Next is the first scheduled time after Now and after Cursor, where
	// the schedule's entry in the upcoming-firings index goes; zero when
	// the schedule has no more firings.
	Next time.Time
}

// Firing is one run to create.
type Firing struct {
	// Scheduled is the scheduled time the run stands for, and the second
	// half of its idempotency key.
	Scheduled time.Time `json:"scheduled"`
	// CatchUp marks the single run that fireOnce creates for all missed
	// times. Its Scheduled is the earliest missed time, and Through the
	// latest one it covers.
	CatchUp bool      `json:"catchUp,omitempty"`
	Through time.Time `json:"through,omitzero"`
}

// Missed summarises missed scheduled times without listing them all: a
// rate(1 minute) schedule after a year of downtime missed half a million.
type Missed struct {
	// First and Last are the earliest and latest missed times; both zero
	// when nothing was missed.
	First time.Time `json:"first,omitzero"`
	Last  time.Time `json:"last,omitzero"`
	// Count is the number of missed times. It is exact when CountExact;
	// otherwise (a cron schedule that missed more than MaxMissedCounted)
	// it is a lower bound.
	Count      int64 `json:"count"`
	CountExact bool  `json:"countExact"`
	// Times lists the first MaxMissedListed missed times, for history.
	Times []time.Time `json:"times,omitempty"`
}

// Plan decides which scheduled times to fire now. The due times are the
// firings after p.LastFired and at or before p.Now. A due time more than
// the grace before Now is missed; the others are on time and each fires.
// For the missed ones the catch-up policy decides:
//
//   - fireOnce creates one run for all of them. Its scheduled time is the
//     earliest missed time, not the latest: that time depends only on the
//     cursor, not on Now, so two sweeps that read the same cursor at
//     different moments derive the same idempotency key and create the
//     run once. The run's Through is the latest time it covers.
//   - skipMissed creates none; they are only reported.
//
// Either way the cursor moves past them, so they are never planned again.
// The work is bounded: a handful of Next and Prev evaluations, at most
// MaxMissedListed list entries, at most MaxMissedCounted steps to count
// a cron schedule's misses, and one firing per minute of grace.
//
// Plan returns ErrPaused for a paused schedule.
func (s *Schedule) Plan(p PlanParams) (Plan, error) {
	if s.Paused {
		return Plan{}, ErrPaused
	}
	grace := p.Grace
	switch {
	case grace == 0:
		grace = DefaultGrace
	case grace < 0 || grace > MaxGrace:
		return Plan{}, fmt.Errorf("plan schedule %s: grace %s is outside (0, %s]", s.ID, grace, MaxGrace)
	}
	if p.Now.IsZero() {
		return Plan{}, errors.New("plan schedule " + s.ID + ": now is required")
	}
	switch s.CatchUp {
	case "", CatchUpFireOnce, CatchUpSkipMissed:
	default:
		return Plan{}, fmt.Errorf("plan schedule %s: unknown catch-up policy %q", s.ID, s.CatchUp)
	}
	tt, err := s.Timetable()
	if err != nil {
		return Plan{}, fmt.Errorf("plan: %w", err)
	}
	return tt.plan(p.LastFired, p.Now, grace, s.CatchUp), nil
}

func (t *Timetable) plan(last, now time.Time, grace time.Duration, policy CatchUpPolicy) Plan {
	plan := Plan{Cursor: last, Missed: Missed{CountExact: true}}
	var first time.Time
	var ok bool
	if last.IsZero() {
		first, ok = t.atOrAfter(t.begin)
	} else {
		first, ok = t.Next(last)
	}
	cutoff := now.Add(-grace)

	if ok && first.Before(cutoff) {
		m := &plan.Missed
		m.First = first
		m.Last, _ = t.Prev(cutoff) // exists: first is a firing before cutoff
		m.Count, m.CountExact = t.count(m.First, m.Last, MaxMissedCounted)
		for f, more := first, true; more && !f.After(m.Last) && len(m.Times) < MaxMissedListed; f, more = t.Next(f) {
			m.Times = append(m.Times, f)
		}
		if policy != CatchUpSkipMissed {
			plan.Fire = append(plan.Fire, Firing{Scheduled: m.First, CatchUp: true, Through: m.Last})
		}
		plan.Cursor = m.Last
		first, ok = t.atOrAfter(cutoff)
	}

	for f, more := first, ok; more && !f.After(now); f, more = t.Next(f) {
		plan.Fire = append(plan.Fire, Firing{Scheduled: f})
		plan.Cursor = f
	}

	from := now
	if plan.Cursor.After(from) {
		from = plan.Cursor
	}
	plan.Next, _ = t.Next(from)
	return plan
}
