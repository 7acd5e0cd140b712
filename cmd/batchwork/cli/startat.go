package cli

import (
	"fmt"
	"strings"
	"time"
)

// parseAt reads submit --at: an RFC 3339 time, or +DURATION from now
// (Go's duration syntax: +90s, +10m, +2h30m). "" is no start time.
func parseAt(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if rest, ok := strings.CutPrefix(v, "+"); ok {
		d, err := time.ParseDuration(rest)
		if err != nil || d <= 0 {
			return time.Time{}, fmt.Errorf("--at %s: want a positive duration after '+', such as +10m", v)
		}
		return now.Add(d), nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--at %s: want an RFC 3339 time such as 2026-12-01T06:00:00Z, or +DURATION such as +10m", v)
	}
	return at, nil
}
