package domain

import (
	"testing"
	"time"
)

// The duration histogram's median is within a bucket's width (√2) of the
// true median, whatever the spread, and buckets are monotonic.
func TestDurationsQuantile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		runs   []time.Duration
		median time.Duration
	}{
		{"empty", nil, 0},
		{"one", []time.Duration{10 * time.Second}, 10 * time.Second},
		{"uniform", []time.Duration{8 * time.Second, 9 * time.Second, 10 * time.Second, 11 * time.Second, 12 * time.Second}, 10 * time.Second},
		{"with stragglers", []time.Duration{time.Second, time.Second, time.Second, time.Second, time.Second, time.Minute, time.Hour}, time.Second},
		{"sub-bucket", []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond}, 20 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d Durations
			for _, r := range tc.runs {
				d.Buckets[DurationBucket(r)]++
			}
			got := d.Median()
			if tc.median == 0 {
				if got != 0 {
					t.Fatalf("median of nothing = %v", got)
				}
				return
			}
			lo, hi := time.Duration(float64(tc.median)/1.42), time.Duration(float64(tc.median)*1.42)
			if tc.median < DurationBase {
				lo, hi = 0, DurationBase
			}
			if got < lo || got > hi {
				t.Fatalf("median %v, want within [%v, %v]", got, lo, hi)
			}
		})
	}
	prev := -1
	for d := time.Millisecond; d < 100*time.Hour; d = d * 11 / 10 {
		b := DurationBucket(d)
		if b < prev || b >= DurationBuckets {
			t.Fatalf("bucket of %v is %d after %d", d, b, prev)
		}
		lo, hi := bucketBounds(b)
		if b > 0 && b < DurationBuckets-1 && (d < lo-time.Microsecond || d >= hi+time.Microsecond) {
			t.Fatalf("%v in bucket %d [%v, %v)", d, b, lo, hi)
		}
		prev = b
	}
}
