package spec

import "testing"

// A percent allowance is the floor of percent × total / 100 computed
// exactly: binary floating point must not lose a whole task where the
// product is an integer ("18.4%" of 375 tasks is 69, not 68).
func TestToleranceAllowedPercentIsExactFloor(t *testing.T) {
	for _, c := range []struct {
		percent float64
		total   int
		want    int
	}{
		{18.4, 375, 69},
		{9.2, 750, 69},
		{4.6, 1500, 69},
		{0.7, 11000, 77},
		{10, 15, 1},
		{10, 9, 0},
		{33.3, 3, 0},
		{100, 7, 7},
		{50, 0, 0},
		{0.01, 10000, 1},
		{0.01, 9999, 0},
	} {
		tol := &Tolerance{Percent: c.percent}
		if got := tol.Allowed(c.total); got != c.want {
			t.Errorf("%v%% of %d tasks allows %d failures, want %d", c.percent, c.total, got, c.want)
		}
	}
}
