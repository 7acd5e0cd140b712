// Package schedule is the pure logic of recurring jobs: the schedule
// definition and its validation, cron and rate expressions, next-time
// computation across time zones and DST, catch-up planning after downtime,
// the time-bucketed index keys the sweep claims, and the idempotency key
// of a firing. It makes no AWS calls and never reads the clock: every
// function takes the times it needs.
//
// # Firing times
//
// A cron expression has five fields (minute hour day-of-month month
// day-of-week, parsed by robfig/cron/v3) and is read on the wall clock of
// the schedule's IANA time zone (UTC by default). Daylight saving changes
// are handled as follows (see Timetable.Next):
//
//   - A schedule whose hour field covers every hour ("*/15 * * * *",
//     "0 * * * *", "@hourly") follows elapsed time: wall times skipped by
//     spring-forward do not exist and do not fire, and both copies of a wall
//     time repeated by fall-back fire. An hourly job keeps running once an
//     hour.
//   - Any other schedule follows the wall clock, as cron does: a wall time
//     skipped by spring-forward fires once at the instant of the change
//     (a 02:30 daily job in New York runs at 03:00 EDT on that day, so a
//     nightly job never loses a night), and a wall time repeated by
//     fall-back fires only at its first occurrence (01:30 EDT, not again at
//     01:30 EST). EventBridge Scheduler instead skips the nonexistent time;
//     we fire it, because a missing nightly run is the worse surprise.
//
// A rate ("rate(5 minutes)", "rate(1 hour)", "rate(2 days)") is a fixed
// period of elapsed time: a day is 24 hours, also across DST. Its firings
// are anchor + k·period for k ≥ 0, where the anchor is the schedule's
// start, or its creation time when it has no start (so a rate schedule
// without a start fires as soon as it is created, as EventBridge
// Scheduler's do). Anchoring keeps firings stable: they never drift with
// the sweep's timing.
//
// Firings lie in [start, end): the start is inclusive, the end exclusive.
package schedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// OverlapPolicy says what a firing does while the schedule's previous run
// is still going.
type OverlapPolicy string

const (
	// OverlapSkip records the firing as skipped and leaves the previous run
	// alone. It is the default: two copies of a batch job racing over the
	// same data is rarely wanted.
	OverlapSkip OverlapPolicy = "skip"
	// OverlapAllow starts the new run next to the previous one.
	OverlapAllow OverlapPolicy = "allow"
	// OverlapCancelPrevious cancels the previous run and starts the new one.
	OverlapCancelPrevious OverlapPolicy = "cancelPrevious"
)

// CatchUpPolicy says what happens to scheduled times that passed unfired
// for longer than the grace period, e.g. during downtime.
type CatchUpPolicy string

const (
	// CatchUpFireOnce fires a single run for everything missed. It is the
	// default: the job catches up once, not once per missed time.
	CatchUpFireOnce CatchUpPolicy = "fireOnce"
	// CatchUpSkipMissed fires none of the missed times; the schedule
	// resumes with its next time.
	CatchUpSkipMissed CatchUpPolicy = "skipMissed"
)

// Defaults and limits.
const (
	DefaultOverlap  = OverlapSkip
	DefaultCatchUp  = CatchUpFireOnce
	DefaultTimeZone = "UTC"

	// MaxScheduleBytes bounds a schedule document: a spec plus a little.
	MaxScheduleBytes = spec.MaxSpecBytes + 8<<10
	// MaxIDLen and MaxNameLen keep FiringKey within the control plane's
	// 128-byte idempotency keys.
	MaxIDLen   = 64
	MaxNameLen = spec.MaxNameLen
	// MaxOwnerLen matches the control plane's bound on owners.
	MaxOwnerLen = 2048
	// MaxExpressionLen and MaxTimeZoneLen bound the text handed to the
	// cron parser and the zone loader.
	MaxExpressionLen = 256
	MaxTimeZoneLen   = 64
)

// Schedule is a recurring job. ID, Owner and CreatedAt are assigned by the
// server; everything else comes from the client (see Parse).
type Schedule struct {
	ID    string `json:"id,omitempty"`
	Owner string `json:"owner,omitempty"`
	Name  string `json:"name"`
	// Spec is the job spec submitted at every firing, stored as the
	// canonical JSON of shared/spec (Parse rewrites it so) so that each run
	// submits exactly what was validated.
	Spec json.RawMessage `json:"spec"`
	// Params are run parameters every firing submits with, beside the
	// scheduledTime and scheduledDate of its slot (params.go).
	Params map[string]string `json:"params,omitempty"`
	// Expression is a five-field cron expression ("30 2 * * *", or a
	// descriptor such as "@daily") or a rate ("rate(5 minutes)").
	Expression string `json:"expression"`
	// TimeZone is the IANA zone a cron expression is read in. It must be
	// empty for a rate, which is elapsed time.
	TimeZone string `json:"timeZone,omitempty"`
	// Start and End bound the firings to [Start, End); zero means unbounded
	// (a schedule never fires before CreatedAt either).
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Overlap and CatchUp are the policies; empty means the default.
	Overlap OverlapPolicy `json:"overlap,omitempty"`
	CatchUp CatchUpPolicy `json:"catchUp,omitempty"`
	// Paused schedules do not fire.
	Paused    bool      `json:"paused,omitempty"`
	CreatedAt time.Time `json:"createdAt,omitzero"`
}

// SetDefaults fills the policies and, for cron, the time zone, so a stored
// schedule states everything it relies on and later changes to a default
// cannot change how it fires. Times are kept in UTC.
func (s *Schedule) SetDefaults() {
	if s.Overlap == "" {
		s.Overlap = DefaultOverlap
	}
	if s.CatchUp == "" {
		s.CatchUp = DefaultCatchUp
	}
	if s.TimeZone == "" && !isRateText(s.Expression) {
		s.TimeZone = DefaultTimeZone
	}
	s.Start = utc(s.Start)
	s.End = utc(s.End)
	s.CreatedAt = utc(s.CreatedAt)
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}

// Validate checks s against every rule and returns a *spec.ValidationError
// listing all violations, or nil. Fields set by the server are checked
// only when present. Errors inside the job spec are reported under
// "spec.<path>".
func (s *Schedule) Validate() error {
	errs, _ := s.validate()
	return errs.err()
}

// validate also returns the parsed spec, which Parse stores canonically.
func (s *Schedule) validate() (errorList, *spec.Job) {
	var errs errorList
	if s.ID != "" {
		checkName(&errs, "id", s.ID, MaxIDLen)
	}
	if s.Owner != "" {
		switch {
		case len(s.Owner) > MaxOwnerLen:
			errs.add("owner", fmt.Sprintf("is longer than %d bytes", MaxOwnerLen))
		case strings.ContainsAny(s.Owner, "#\x00"):
			errs.add("owner", "must not contain '#' or NUL")
		}
	}
	checkName(&errs, "name", s.Name, MaxNameLen)

	job := checkSpec(&errs, s.Spec)
	checkParams(&errs, s, job) // params.go
	parseExpression(&errs, s.Expression, s.TimeZone)

	if !s.Start.IsZero() && !s.End.IsZero() && !s.End.After(s.Start) {
		errs.add("end", fmt.Sprintf("must be after start (%s)", s.Start.UTC().Format(time.RFC3339)))
	}
	if !s.CreatedAt.IsZero() && !s.End.IsZero() && !s.End.After(s.CreatedAt) {
		errs.add("end", fmt.Sprintf("must be after the schedule's creation (%s)", s.CreatedAt.UTC().Format(time.RFC3339)))
	}

	switch s.Overlap {
	case "", OverlapSkip, OverlapAllow, OverlapCancelPrevious:
	default:
		errs.add("overlap", fmt.Sprintf("must be one of %q, %q or %q", OverlapSkip, OverlapAllow, OverlapCancelPrevious))
	}
	switch s.CatchUp {
	case "", CatchUpFireOnce, CatchUpSkipMissed:
	default:
		errs.add("catchUp", fmt.Sprintf("must be %q or %q", CatchUpFireOnce, CatchUpSkipMissed))
	}
	return errs, job
}

// namePattern is shared/spec's: names stay usable verbatim in keys and
// logs. It also keeps '#' and '@' out of ids, which FiringKey relies on.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func checkName(errs *errorList, field, v string, maxLen int) {
	switch {
	case v == "":
		errs.add(field, "is required")
	case len(v) > maxLen:
		errs.add(field, fmt.Sprintf("must be at most %d characters", maxLen))
	case !namePattern.MatchString(v):
		errs.add(field, fmt.Sprintf("%q must start with a letter or digit and contain only letters, digits, '_' and '-'", v))
	}
}

// checkSpec parses the job spec with shared/spec's strict parser and
// reports its errors under "spec".
func checkSpec(errs *errorList, raw json.RawMessage) *spec.Job {
	if len(raw) == 0 || string(raw) == "null" {
		errs.add("spec", "is required")
		return nil
	}
	job, err := spec.Parse(raw)
	if err == nil {
		return job
	}
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		errs.add("spec", err.Error())
		return nil
	}
	for _, fe := range ve.Errors {
		if fe.Field == "" {
			fe.Field = "spec"
		} else {
			fe.Field = "spec." + fe.Field
		}
		*errs = append(*errs, fe)
	}
	return nil
}

// Decide says what a firing does given whether the previous run is still
// going. An empty policy is the default.
func (p OverlapPolicy) Decide(previousRunning bool) OverlapAction {
	if !previousRunning {
		return ActionStart
	}
	switch p {
	case OverlapAllow:
		return ActionStart
	case OverlapCancelPrevious:
		return ActionCancelPreviousAndStart
	default:
		return ActionSkip
	}
}

// OverlapAction is the outcome of OverlapPolicy.Decide.
type OverlapAction string

const (
	ActionStart                  OverlapAction = "start"
	ActionSkip                   OverlapAction = "skip"
	ActionCancelPreviousAndStart OverlapAction = "cancelPreviousAndStart"
)
