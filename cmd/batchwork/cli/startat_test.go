package cli

import (
	"testing"
	"time"
)

func TestParseAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in   string
		want time.Time
		bad  bool
	}{
		{in: "", want: time.Time{}},
		{in: "+10m", want: now.Add(10 * time.Minute)},
		{in: "+2h30m", want: now.Add(150 * time.Minute)},
		{in: "2026-12-01T06:00:00Z", want: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)},
		{in: "2026-12-01T07:00:00+01:00", want: time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)},
		{in: "+-5m", bad: true},
		{in: "+0s", bad: true},
		{in: "tomorrow", bad: true},
		{in: "2026-12-01", bad: true},
	} {
		got, err := parseAt(c.in, now)
		if (err != nil) != c.bad || !got.Equal(c.want) {
			t.Errorf("parseAt(%q) = %v, %v; want %v, error %v", c.in, got, err, c.want, c.bad)
		}
	}
}
