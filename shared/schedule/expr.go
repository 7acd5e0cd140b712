package schedule

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	// Embedded zone rules, so evaluating a schedule does not depend on the
	// host having zoneinfo (minimal Lambda images may not). A host that
	// has zoneinfo still takes precedence.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// Kind says whether an expression is a cron or a rate.
type Kind string

const (
	KindCron Kind = "cron"
	KindRate Kind = "rate"
)

// Rate limits. The minimum is EventBridge's; the maximum keeps catch-up
// arithmetic far from overflow, and longer periods read better as cron.
const (
	MinRate = time.Minute
	MaxRate = 366 * 24 * time.Hour
)

// Expression is a parsed cron (with its zone) or rate expression.
type Expression struct {
	kind Kind
	text string

	// cron: sched is evaluated on wall-clock readings expressed in UTC,
	// which has no DST; loc maps those readings to instants (see next.go).
	sched     *cron.SpecSchedule
	loc       *time.Location
	everyHour bool

	// rate
	period time.Duration
}

// Kind is KindCron or KindRate.
func (e *Expression) Kind() Kind { return e.kind }

// String is the expression as written.
func (e *Expression) String() string { return e.text }

// Location is the zone a cron expression is read in (UTC for a rate).
func (e *Expression) Location() *time.Location {
	if e.loc == nil {
		return time.UTC
	}
	return e.loc
}

// Period is a rate's period, or 0 for a cron expression.
func (e *Expression) Period() time.Duration { return e.period }

// ParseExpression parses a cron or rate expression and, for cron, the IANA
// time zone it is read in ("" means UTC). Errors are a
// *spec.ValidationError naming "expression" or "timeZone".
func ParseExpression(expr, timeZone string) (*Expression, error) {
	var errs errorList
	e := parseExpression(&errs, expr, timeZone)
	if err := errs.err(); err != nil {
		return nil, err
	}
	return e, nil
}

func parseExpression(errs *errorList, expr, timeZone string) *Expression {
	switch {
	case expr == "":
		errs.add("expression", "is required")
		return nil
	case len(expr) > MaxExpressionLen:
		errs.add("expression", fmt.Sprintf("is longer than %d bytes", MaxExpressionLen))
		return nil
	}
	if isRateText(expr) {
		if timeZone != "" {
			errs.add("timeZone", "applies only to cron expressions; a rate is elapsed time")
		}
		period, msg := parseRate(expr)
		if msg != "" {
			errs.add("expression", msg)
			return nil
		}
		return &Expression{kind: KindRate, text: expr, period: period}
	}

	loc, locErr := loadLocation(timeZone)
	if locErr != "" {
		errs.add("timeZone", locErr)
	}
	sched, msg := parseCron(expr)
	if msg != "" {
		errs.add("expression", msg)
		return nil
	}
	if locErr != "" {
		return nil
	}
	return &Expression{
		kind:      KindCron,
		text:      expr,
		sched:     sched,
		loc:       loc,
		everyHour: sched.Hour&allHours == allHours,
	}
}

// isRateText reports whether the text is meant as a rate, so that a
// malformed rate gets a rate error rather than a cron one.
func isRateText(expr string) bool {
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(expr)), "rate")
}

const rateUsage = `must be rate(<value> <unit>) with a whole number and a unit of minute(s), hour(s) or day(s), e.g. "rate(5 minutes)"`

// parseRate parses EventBridge's rate syntax, including its singular and
// plural rule: "rate(1 hour)" and "rate(2 hours)", never "rate(1 hours)".
func parseRate(expr string) (time.Duration, string) {
	inner, ok := strings.CutPrefix(expr, "rate(")
	if !ok {
		return 0, rateUsage
	}
	inner, ok = strings.CutSuffix(inner, ")")
	if !ok {
		return 0, rateUsage
	}
	value, unit, ok := strings.Cut(inner, " ")
	if !ok || value == "" || unit == "" || strings.ContainsAny(unit, " \t") {
		return 0, rateUsage
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, rateUsage
		}
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return 0, fmt.Sprintf("rate %s is too large; at most %s", value, MaxRate)
	}

	var per time.Duration
	singular := strings.TrimSuffix(unit, "s")
	switch singular {
	case "minute":
		per = time.Minute
	case "hour":
		per = time.Hour
	case "day":
		per = 24 * time.Hour
	case "second", "millisecond":
		return 0, "rate is too fine: the smallest rate is 1 minute; use minute(s), hour(s) or day(s)"
	default:
		return 0, rateUsage
	}
	if n == 0 {
		return 0, "rate must be at least 1 minute"
	}
	if n == 1 && singular != unit {
		return 0, fmt.Sprintf("a rate of 1 takes the singular unit: rate(1 %s)", singular)
	}
	if n > 1 && singular == unit {
		return 0, fmt.Sprintf("a rate of %d takes the plural unit: rate(%d %ss)", n, n, singular)
	}
	if n > int64(MaxRate/per) {
		return 0, fmt.Sprintf("rate is too long; at most %d days (use a cron expression for longer periods)", MaxRate/(24*time.Hour))
	}
	return time.Duration(n) * per, ""
}

// cronParser takes the five standard fields and the @yearly…@hourly
// descriptors. Parsing is robfig/cron's; only the shell around it is ours.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

const allHours = 1<<24 - 1

// wallRef is where the "does it ever fire" check starts: a leap year, so
// "0 0 29 2 *" passes and "0 0 30 2 *" does not.
var wallRef = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func parseCron(expr string) (sched *cron.SpecSchedule, msg string) {
	trimmed := strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(trimmed, "TZ=") || strings.HasPrefix(trimmed, "CRON_TZ="):
		// robfig/cron accepts a zone prefix (and panics on "TZ=x" without
		// a space); the zone has its own field.
		return nil, "must not carry a time zone; set timeZone instead"
	case strings.HasPrefix(trimmed, "@every"):
		return nil, `fixed intervals are written as a rate, e.g. "rate(5 minutes)"`
	case strings.HasPrefix(trimmed, "cron("):
		return nil, `write the five cron fields without cron(...), e.g. "30 2 * * *"`
	}
	// The parser is third-party code fed user input; a panic in it must
	// become a rejected expression, not a crashed API.
	defer func() {
		if r := recover(); r != nil {
			sched, msg = nil, fmt.Sprintf("is not a valid cron expression: %v", r)
		}
	}()
	s, err := cronParser.Parse(trimmed)
	if err != nil {
		return nil, "is not a valid five-field cron expression (minute hour day-of-month month day-of-week): " + err.Error()
	}
	ss, ok := s.(*cron.SpecSchedule)
	if !ok {
		return nil, "is not a valid five-field cron expression"
	}
	c := *ss
	c.Location = time.UTC
	if c.Next(wallRef.Add(-time.Nanosecond)).IsZero() {
		return nil, "never fires (no date matches its day-of-month and month, e.g. February 30)"
	}
	return &c, ""
}

// locations caches loaded zones: LoadLocation reads and parses zone data
// on every call.
var locations sync.Map // string -> *time.Location

func loadLocation(name string) (*time.Location, string) {
	switch {
	case name == "" || name == "UTC":
		return time.UTC, ""
	case len(name) > MaxTimeZoneLen:
		return nil, fmt.Sprintf("is longer than %d bytes", MaxTimeZoneLen)
	case name == "Local":
		// "Local" is whatever zone the server runs in.
		return nil, `must be an IANA time zone name such as "Europe/London", not "Local"`
	}
	if v, ok := locations.Load(name); ok {
		return v.(*time.Location), ""
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Sprintf("unknown time zone %q; use an IANA name such as \"America/New_York\"", name)
	}
	locations.Store(name, loc)
	return loc, ""
}
