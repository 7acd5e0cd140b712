package batchwork

import (
	"math"
	"slices"
	"testing"
)

// The scale-out policy's steps: every task count while they fit in the
// quota of step adjustments; beyond, exact counts first, then steps that
// grow geometrically to the maximum, so a need is rounded up by a bounded
// fraction and never capped below the maximum.
func TestScalingSteps(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		max, limit int
		want       []int // nil: check the properties only
	}{
		{1, 20, []int{1}},
		{10, 20, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{20, 20, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}},
		{100, 20, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 16, 20, 26, 32, 40, 51, 64, 80, 100}},
		{21, 20, nil},
		{37, 20, nil},
		{1000, 20, nil},
		{5000, 20, nil},
		{50, 10, nil},
	} {
		got := scalingSteps(c.max, c.limit)
		if c.want != nil && !slices.Equal(got, c.want) {
			t.Errorf("scalingSteps(%d, %d) = %v, want %v", c.max, c.limit, got, c.want)
		}
		if len(got) > c.limit || got[0] != 1 || got[len(got)-1] != c.max {
			t.Errorf("scalingSteps(%d, %d) = %v: want at most %d steps from 1 to %d", c.max, c.limit, got, c.limit, c.max)
		}
		// Ascending, and no need rounded up by more than the geometric
		// ratio (plus the one task a ceiling adds).
		exact := c.limit / 2
		ratio := math.Pow(float64(c.max)/float64(exact), 1/float64(c.limit-exact))
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Errorf("scalingSteps(%d, %d) = %v: not ascending at %d", c.max, c.limit, got, i)
			}
			if need := got[i-1] + 1; float64(got[i]) > math.Ceil(float64(need)*ratio)+1 {
				t.Errorf("scalingSteps(%d, %d) = %v: a need of %d gets %d", c.max, c.limit, got, need, got[i])
			}
		}
	}
}
