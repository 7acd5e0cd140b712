package schedule

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Timetable is a schedule's set of firing instants: its expression bounded
// to [begin, end). Build one with Schedule.Timetable or NewTimetable.
type Timetable struct {
	expr  *Expression
	begin time.Time // first instant that may fire; never zero
	end   time.Time // first instant that may not; zero when unbounded
	// anchor is a rate's first firing: begin rounded up to a whole second,
	// so every firing is a whole second and FiringKey stays short.
	anchor time.Time
}

// NewTimetable bounds expr to [begin, end). begin is required (the
// schedule's start, or its creation time); end may be zero.
func NewTimetable(expr *Expression, begin, end time.Time) (*Timetable, error) {
	if expr == nil || (expr.kind == KindRate) == (expr.sched != nil) {
		return nil, errors.New("timetable: no parsed expression (use ParseExpression)")
	}
	if begin.IsZero() {
		return nil, errors.New("timetable: begin is required (the schedule's start or creation time)")
	}
	t := &Timetable{expr: expr, begin: begin, end: end}
	if expr.kind == KindRate {
		t.anchor = begin.Truncate(time.Second)
		if t.anchor.Before(begin) {
			t.anchor = t.anchor.Add(time.Second)
		}
	}
	return t, nil
}

// Timetable returns s's firing times. A schedule fires from its start or,
// without one, from its creation. It checks only what timing needs, not
// the job spec, so the sweep can call it for every due schedule.
func (s *Schedule) Timetable() (*Timetable, error) {
	var errs errorList
	expr := parseExpression(&errs, s.Expression, s.TimeZone)
	if !s.Start.IsZero() && !s.End.IsZero() && !s.End.After(s.Start) {
		errs.add("end", "must be after start")
	}
	if err := errs.err(); err != nil {
		return nil, fmt.Errorf("schedule %s: %w", s.ID, err)
	}
	begin := s.Start
	if begin.IsZero() {
		begin = s.CreatedAt
	}
	if begin.IsZero() {
		return nil, fmt.Errorf("schedule %s: has neither start nor createdAt", s.ID)
	}
	return NewTimetable(expr, begin, s.End)
}

// Expression is the timetable's expression.
func (t *Timetable) Expression() *Expression { return t.expr }

// Next returns the first firing strictly after the given instant, in UTC,
// and false when there is none: the schedule has ended, or (for a cron
// expression that matches only rarely) nothing matches within five years
// of the search, robfig/cron's horizon.
func (t *Timetable) Next(after time.Time) (time.Time, bool) {
	return t.atOrAfter(after.Add(time.Nanosecond))
}

// atOrAfter returns the first firing at or after x.
func (t *Timetable) atOrAfter(x time.Time) (time.Time, bool) {
	if x.Before(t.begin) {
		x = t.begin
	}
	var f time.Time
	var ok bool
	if t.expr.kind == KindRate {
		f, ok = t.rateAtOrAfter(x), true
	} else {
		f, ok = t.expr.cronAtOrAfter(x)
	}
	if !ok || (!t.end.IsZero() && !f.Before(t.end)) {
		return time.Time{}, false
	}
	return f.UTC(), true
}

// Prev returns the last firing strictly before the given instant, and
// false when there is none. It costs O(log(gap)) evaluations of Next, not
// one per firing, so it stays cheap after a long downtime.
func (t *Timetable) Prev(before time.Time) (time.Time, bool) {
	if !t.end.IsZero() && before.After(t.end) {
		before = t.end
	}
	if !before.After(t.begin) {
		return time.Time{}, false
	}
	if t.expr.kind == KindRate {
		return t.ratePrev(before)
	}
	return t.cronPrev(before)
}

// Upcoming lists up to n firings after the given instant, for previews.
func (t *Timetable) Upcoming(after time.Time, n int) []time.Time {
	var out []time.Time
	for len(out) < n {
		f, ok := t.Next(after)
		if !ok {
			break
		}
		out = append(out, f)
		after = f
	}
	return out
}

// count returns how many firings lie in [first, last], both firings. For
// a rate it is arithmetic; for cron it walks at most limit firings and
// reports a lower bound (exact=false) beyond that.
func (t *Timetable) count(first, last time.Time, limit int64) (n int64, exact bool) {
	if last.Before(first) {
		return 0, true
	}
	if t.expr.kind == KindRate {
		p := int64(t.expr.period / time.Second)
		return (last.Unix()-first.Unix())/p + 1, true
	}
	n = 1
	for f := first; f.Before(last); n++ {
		if n >= limit {
			return n, false
		}
		var ok bool
		if f, ok = t.Next(f); !ok {
			break
		}
	}
	return n, true
}

// Rates: firings are anchor + k·period, k ≥ 0. Arithmetic is in whole Unix
// seconds (the anchor and the period are whole seconds), which cannot
// saturate the way time.Duration does over centuries.

func (t *Timetable) rateAtOrAfter(x time.Time) time.Time {
	a := t.anchor
	if !x.After(a) {
		return a
	}
	p := int64(t.expr.period / time.Second)
	d := x.Unix() - a.Unix()
	k := d / p
	if d%p != 0 || x.Nanosecond() != 0 {
		k++
	}
	return time.Unix(a.Unix()+k*p, 0).UTC()
}

func (t *Timetable) ratePrev(before time.Time) (time.Time, bool) {
	a := t.anchor
	if !before.After(a) {
		return time.Time{}, false
	}
	p := int64(t.expr.period / time.Second)
	d := before.Unix() - a.Unix()
	var k int64
	if before.Nanosecond() != 0 {
		k = d / p
	} else {
		k = (d - 1) / p
	}
	return time.Unix(a.Unix()+k*p, 0).UTC(), true
}

// cronPrev finds the last firing before `before` by an exponential search
// back for a window that holds a firing, then bisection on that window.
// Invariant of the bisection: the answer lies in [lo, hi).
func (t *Timetable) cronPrev(before time.Time) (time.Time, bool) {
	hasFiringIn := func(from time.Time) bool {
		f, ok := t.atOrAfter(from)
		return ok && f.Before(before)
	}
	var lo time.Time
	for w := time.Minute; ; w *= 2 {
		if w >= math.MaxInt64/2 || !before.Add(-w).After(t.begin) {
			lo = t.begin
		} else {
			lo = before.Add(-w)
		}
		if hasFiringIn(lo) {
			break
		}
		if lo.Equal(t.begin) {
			return time.Time{}, false
		}
	}
	hi := before
	for hi.Sub(lo) > time.Minute {
		mid := lo.Add(hi.Sub(lo) / 2)
		if hasFiringIn(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	// At most a couple of firings remain in [lo, hi); walk them.
	f, _ := t.atOrAfter(lo)
	for {
		n, ok := t.Next(f)
		if !ok || !n.Before(before) {
			return f, true
		}
		f = n
	}
}

// maxSegments bounds the walk over zone offset changes in cronAtOrAfter.
// Zones change offset at most a few times a year and robfig/cron looks at
// most five years ahead, so this is never reached in practice.
const maxSegments = 64

// cronAtOrAfter returns the first firing at or after x.
//
// robfig/cron can evaluate in a zone itself, but across DST it skips a
// nonexistent wall time for that day and fires a repeated one twice (see
// TestRobfigNativeDST). So the cron is evaluated on wall-clock readings in
// UTC, which has no DST, and mapped to instants one constant-offset
// segment of the zone at a time. At a segment's start the rules in the
// package doc apply: a spring-forward gap fires at the change instant if
// any of its wall times match; a fall-back repeat is skipped unless the
// schedule fires every hour.
func (e *Expression) cronAtOrAfter(x time.Time) (time.Time, bool) {
	for range maxSegments {
		local := x.In(e.loc)
		_, off := local.Zone()
		segStart, segEnd := local.ZoneBounds()
		prevOff := off
		if !segStart.IsZero() {
			_, prevOff = segStart.Add(-time.Nanosecond).In(e.loc).Zone()
		}
		if !e.everyHour {
			switch {
			case prevOff < off && x.Equal(segStart):
				gapFrom, gapTo := wallClock(segStart, prevOff), wallClock(segStart, off)
				if w := e.sched.Next(gapFrom.Add(-time.Nanosecond)); !w.IsZero() && w.Before(gapTo) {
					return segStart, true
				}
			case prevOff > off:
				// The wall times of [segStart, repeatEnd) were already
				// read once before the change.
				repeatEnd := segStart.Add(time.Duration(prevOff-off) * time.Second)
				if x.Before(repeatEnd) {
					x = repeatEnd
					if !segEnd.IsZero() && !x.Before(segEnd) {
						x = segEnd
						continue
					}
				}
			}
		}
		w := e.sched.Next(wallClock(x, off).Add(-time.Nanosecond))
		if w.IsZero() {
			return time.Time{}, false
		}
		f := w.Add(-time.Duration(off) * time.Second)
		if segEnd.IsZero() || f.Before(segEnd) {
			return f, true
		}
		x = segEnd
	}
	return time.Time{}, false
}

// wallClock returns the reading of a clock at UTC offset off (seconds) at
// instant t, as a UTC time with those fields.
func wallClock(t time.Time, off int) time.Time {
	return t.UTC().Add(time.Duration(off) * time.Second)
}
