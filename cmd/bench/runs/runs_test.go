package runs

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedianIsTheMiddleRate(t *testing.T) {
	run := func(s float64) Run { return Run{Tasks: 100, Elapsed: time.Duration(s * float64(time.Second))} }
	for _, tc := range []struct {
		name string
		rs   []Run
		want int
	}{
		{"none", nil, -1},
		{"one", []Run{run(1)}, 0},
		{"three, slowest first", []Run{run(3), run(1), run(2)}, 2},
		{"three, median last", []Run{run(1), run(3), run(2)}, 2},
		{"two: the slower", []Run{run(1), run(2)}, 1},
		{"ties keep order", []Run{run(2), run(2), run(2)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Median(tc.rs); got != tc.want {
				t.Fatalf("Median = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestSustainedLeavesOutTheStartAndEnd(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	// 100 claims: a slow first tenth (1 s before the first), 10 ms apart
	// through the middle, a slow last tenth.
	var claims []time.Duration
	at := ms(1000)
	for i := 0; i < 100; i++ {
		switch {
		case i < 10 || i >= 90:
			at += ms(100)
		default:
			at += ms(10)
		}
		claims = append(claims, at)
	}
	for _, tc := range []struct {
		name   string
		claims []time.Duration
		want   float64
		ok     bool
	}{
		{"steady middle", claims, 100, true}, // claims 10..89: 79 gaps of 10 ms
		{"too few", claims[:10], 0, false},
		{"all at once", make([]time.Duration, 40), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Run{Tasks: len(tc.claims), Claims: tc.claims}.Sustained()
			if ok != tc.ok || math.Abs(got-tc.want) > 0.5 {
				t.Fatalf("Sustained = %.2f, %v; want %.2f, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	// The end-to-end rate of the same run is lower: the start and end count.
	r := Run{Tasks: 100, Elapsed: claims[99], Claims: claims}
	if s, _ := r.Sustained(); r.Rate() >= s {
		t.Fatalf("end-to-end %.1f not below sustained %.1f", r.Rate(), s)
	}
}

func TestTimelineKeepsOneRunsClaims(t *testing.T) {
	var tl Timeline
	tl.Claimed() // before any run: dropped
	tl.Start()
	done := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			for j := 0; j < 25; j++ {
				tl.Claimed()
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < 4; i++ {
		<-done
	}
	at := tl.Take()
	if len(at) != 100 {
		t.Fatalf("%d claims, want 100", len(at))
	}
	for i := 1; i < len(at); i++ {
		if at[i] < at[i-1] {
			t.Fatalf("claims out of order at %d", i)
		}
	}
	tl.Claimed() // after Take: the run is over
	tl.Start()
	if n := len(tl.Take()); n != 0 {
		t.Fatalf("%d claims in a new run, want 0", n)
	}
}

func TestDescribeMarksTheReportedRun(t *testing.T) {
	rs := []Run{{Tasks: 10, Elapsed: time.Second, CPU: 5 * time.Millisecond, Requests: 25}, {Tasks: 10, Elapsed: 2 * time.Second}}
	got := Describe(rs, 1)
	if !strings.Contains(got, "1: 10 tasks/s (sustained 0), 500 µs, 2.50 requests a task") || !strings.Contains(got, "2: 5 tasks/s (sustained 0), 0 µs, 0.00 requests a task (reported") {
		t.Fatalf("Describe = %q", got)
	}
}
