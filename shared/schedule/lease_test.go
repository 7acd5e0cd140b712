package schedule

import (
	"testing"
	"time"
)

func TestShardLeaseRules(t *testing.T) {
	now := time.Date(2026, 3, 10, 7, 30, 20, 0, time.UTC)
	live := now.Add(10 * time.Second)
	cases := []struct {
		name          string
		l             ShardLease
		run           string
		takeable, own bool
	}{
		{"never taken", ShardLease{}, "b", true, false},
		{"held by another, live", ShardLease{Owner: "a", Expires: live}, "b", false, false},
		{"held by another, expires now", ShardLease{Owner: "a", Expires: now}, "b", true, false},
		{"held by another, expired", ShardLease{Owner: "a", Expires: now.Add(-time.Second)}, "b", true, false},
		{"held by the run, live", ShardLease{Owner: "b", Expires: live}, "b", true, true},
		{"held by the run, expired", ShardLease{Owner: "b", Expires: now.Add(-time.Millisecond)}, "b", true, false},
		{"released by the run", ShardLease{Owner: "b"}, "b", true, false},
		{"no run holds nothing", ShardLease{}, "", true, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.l.TakeableBy(c.run, now); got != c.takeable {
				t.Errorf("TakeableBy(%q) = %v, want %v", c.run, got, c.takeable)
			}
			if got := c.l.HeldBy(c.run, now); got != c.own {
				t.Errorf("HeldBy(%q) = %v, want %v", c.run, got, c.own)
			}
		})
	}
}

func TestShardWatermarkRules(t *testing.T) {
	now := time.Date(2026, 3, 10, 7, 30, 20, 0, time.UTC)
	m := func(min int) time.Time { return time.Date(2026, 3, 10, 7, min, 0, 0, time.UTC) }
	global := m(20)
	cases := []struct {
		name    string
		wm      time.Time
		drained time.Time
		from    time.Time
		to      time.Time
		moves   bool
	}{
		{name: "no own watermark: from the global one", drained: m(25), from: m(20), to: m(25), moves: true},
		{name: "own watermark wins", wm: m(28), drained: m(29), from: m(28), to: m(29), moves: true},
		{name: "capped at the minute before now", wm: m(28), drained: m(30), from: m(28), to: m(29), moves: true},
		{name: "never back", wm: m(29), drained: m(27), from: m(29), to: m(27), moves: false},
		{name: "nothing drained", wm: m(29), drained: m(29), from: m(29), to: m(29), moves: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := ShardLease{Watermark: c.wm}
			if got := l.From(global); !got.Equal(c.from) {
				t.Errorf("From = %s, want %s", got, c.from)
			}
			to, moves := l.AdvanceTo(global, c.drained, now)
			if moves != c.moves || (moves && !to.Equal(c.to)) {
				t.Errorf("AdvanceTo(%s) = %s, %v; want %s, %v", c.drained, to, moves, c.to, c.moves)
			}
		})
	}
}
