package schedule

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/google/go-cmp/cmp"
)

// FuzzParseExpression checks that the expression parser never panics,
// reports failures as field errors on expression or timeZone, and that
// every accepted expression yields a consistent timetable: Next moves
// forward, is found again from just before itself, agrees with Prev, and
// (for cron) lands on a matching wall time or on a DST change instant.
func FuzzParseExpression(f *testing.F) {
	seeds := []struct {
		expr, tz string
		after    int64
	}{
		{"30 2 * * *", "America/New_York", 1710036000},
		{"30 1 * * *", "America/New_York", 1730609400},
		{"*/15 * * * *", "Europe/London", 1711846800},
		{"0 0 29 2 *", "", 1700000000},
		{"0 0 * * *", "America/Santiago", 1725753600},
		{"15 2 * * *", "Australia/Lord_Howe", 1728142200},
		{"@hourly", "Asia/Kolkata", 0},
		{"0 9 * * mon-fri", "Asia/Tokyo", 1717200000},
		{"rate(5 minutes)", "", 1717200000},
		{"rate(1 day)", "", -86400},
		{"rate(0 minutes)", "", 0},
		{"TZ=UTC", "", 0},
		{"CRON_TZ=Europe/London 0 * * * *", "", 0},
		{"@every 1s", "", 0},
		{"*/0 * * * *", "", 0},
		{"0-63 * * * *", "", 0},
		{"1-2-3 * * * *", "", 0},
		{"? ? ? ? ?", "Local", 0},
		{"0 0 31 4,6,9,11 *", "", 0},
		{"0 0 1 1 0", "../../etc/passwd", 0},
	}
	for _, s := range seeds {
		f.Add(s.expr, s.tz, s.after)
	}
	f.Fuzz(func(t *testing.T, expr, tz string, afterSec int64) {
		e, err := ParseExpression(expr, tz)
		if err != nil {
			var ve *spec.ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("ParseExpression error %v (%T) is not a non-empty *spec.ValidationError", err, err)
			}
			for _, fe := range ve.Errors {
				if fe.Field != "expression" && fe.Field != "timeZone" {
					t.Fatalf("error names field %q: %v", fe.Field, fe)
				}
			}
			return
		}
		// Keep the probe within a few centuries of now, where zone data
		// and robfig/cron's five-year horizon make sense.
		after := time.Unix(afterSec%(200*365*86400), 0)
		begin := time.Unix(0, 0)
		tab, err := NewTimetable(e, begin, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		n, ok := tab.Next(after)
		if !ok {
			return // nothing within robfig/cron's horizon: only rare dates
		}
		if !n.After(after) || n.Before(begin) {
			t.Fatalf("Next(%s) = %s is not after it", after, n)
		}
		if again, ok := tab.atOrAfter(n); !ok || !again.Equal(n) {
			t.Fatalf("atOrAfter(Next) = %s, %v; want %s", again, ok, n)
		}
		if again, ok := tab.Next(n.Add(-time.Nanosecond)); !ok || !again.Equal(n) {
			t.Fatalf("Next(%s - 1ns) = %s, %v; want %s", n, again, ok, n)
		}
		if p, ok := tab.Prev(n); ok {
			if !p.Before(n) {
				t.Fatalf("Prev(%s) = %s is not before it", n, p)
			}
			if again, _ := tab.Next(p); !again.Equal(n) {
				t.Fatalf("Next(Prev(%s)) = %s", n, again)
			}
		}
		if e.Kind() == KindCron {
			local := n.In(e.loc)
			wall := time.Date(local.Year(), local.Month(), local.Day(), local.Hour(), local.Minute(), local.Second(), 0, time.UTC)
			matches := e.sched.Next(wall.Add(-time.Nanosecond)).Equal(wall)
			_, offBefore := n.Add(-time.Nanosecond).In(e.loc).Zone()
			_, offAt := local.Zone()
			if !matches && !(offAt > offBefore && !e.everyHour) {
				t.Fatalf("firing %s (wall %s) neither matches %q nor is a spring-forward instant", n, local, expr)
			}
		}
	})
}

// FuzzParse checks that schedule parsing never panics, reports failures as
// a *spec.ValidationError, and that an accepted schedule survives the trip
// through its JSON form unchanged.
func FuzzParse(f *testing.F) {
	seeds := []string{
		`{"name":"n","spec":` + validSpec + `,"expression":"30 2 * * *","timeZone":"America/New_York"}`,
		`{"name":"n","spec":` + validSpec + `,"expression":"rate(1 hour)","start":"2024-01-01T00:00:00Z","end":"2024-02-01T00:00:00.5+01:00","overlap":"allow","catchUp":"skipMissed","paused":true}`,
		`{"name":"n","name":"m"}`,
		`{"id":"x","spec":[],"start":5}`,
		`[]`,
		`{"name":"n","spec":{"name":"j","stages":"x"},"expression":"TZ=UTC"}`,
		``,
		`null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			var ve *spec.ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("Parse error %v (%T) is not a non-empty *spec.ValidationError", err, err)
			}
			return
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal a parsed schedule: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Marshal(s)) = %v\nencoded: %s", err, b)
		}
		if diff := cmp.Diff(s, again); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s\nencoded: %s", diff, b)
		}
	})
}
