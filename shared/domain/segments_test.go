package domain

import "testing"

func TestStageSegments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		st       Stage
		segments int
		sent     map[int]bool
		allSent  bool
	}{
		{name: "one chain", st: Stage{Total: 25, Enqueued: 10}, segments: 1,
			sent: map[int]bool{-1: false, 0: true, 9: true, 10: false, 24: false}},
		{name: "one chain, no larger than a segment", st: Stage{Total: 10, Enqueued: 10, SegmentTasks: 10}, segments: 1,
			sent: map[int]bool{9: true}, allSent: true},
		{name: "segments part way", st: Stage{Total: 25, Enqueued: 10, SegmentTasks: 10, Segments: map[int]int{1: 15, 2: 25}}, segments: 3,
			sent: map[int]bool{9: true, 10: true, 14: true, 15: false, 19: false, 20: true, 24: true, 25: false}},
		{name: "a segment not yet counted starts at its first partition", st: Stage{Total: 25, Enqueued: 10, SegmentTasks: 10}, segments: 3,
			sent: map[int]bool{9: true, 10: false, 20: false}},
		{name: "every segment sent", st: Stage{Total: 25, Enqueued: 10, SegmentTasks: 10, Segments: map[int]int{1: 20, 2: 25}}, segments: 3,
			sent: map[int]bool{0: true, 19: true, 24: true}, allSent: true},
		{name: "materialized", st: Stage{Total: 25, Materialized: true, SegmentTasks: 10}, segments: 3,
			sent: map[int]bool{0: true, 24: true, 25: false}, allSent: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.st.SegmentCount(); got != c.segments {
				t.Errorf("SegmentCount %d, want %d", got, c.segments)
			}
			for p, want := range c.sent {
				if got := c.st.Sent(p); got != want {
					t.Errorf("Sent(%d) %v, want %v", p, got, want)
				}
			}
			if got := c.st.AllSent(); got != c.allSent {
				t.Errorf("AllSent %v, want %v", got, c.allSent)
			}
		})
	}
}
