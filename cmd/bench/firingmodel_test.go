package main

import (
	"math"
	"strings"
	"testing"
)

// The model's binding limit is the lowest ceiling: the table's write quota
// for schedules spread over owners, one owner's partition key when one
// owner has them all.
func TestFiringModelLimits(t *testing.T) {
	m := firingMeasure{firings: 100, requests: 15, wcu: 60, rcu: 8,
		owner: map[string]keyUnits{"SCH#<owner>": {wcu: 2, rcu: 3}, "OWN#<owner>": {wcu: 2.5}}}
	cases := []struct {
		perOwner bool
		what     string
		rate     float64
	}{
		{false, "the table's write quota", 40000.0 / 60},
		{true, "the owner's partition key OWN#<owner> (1,000 write units", 1000 / 2.5},
	}
	for _, c := range cases {
		l := awsFiringModel(m).limits(c.perOwner)[0]
		if !strings.HasPrefix(l.what, c.what) || math.Abs(l.rate-c.rate) > 0.01 {
			t.Errorf("per owner %t: limited by %q at %.1f/s, want %q at %.1f/s", c.perOwner, l.what, l.rate, c.what, c.rate)
		}
	}
	if got := esmReach(awsESMMax); math.Abs(got-199) > 0.01 {
		t.Errorf("the event source reaches 1,000 batches in %.1f s from cold, want 199 s", got)
	}
}
