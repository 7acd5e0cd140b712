package main

import (
	"strings"
	"testing"
	"time"
)

func TestCPUVerdict(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cpu        time.Duration
		tasks      int
		bare       time.Duration
		want, drop string
	}{
		{"under the target", 1000 * time.Millisecond, 2000, 0, "CPU per no-op task 500 µs (target <= 600 µs): met", "bare"},
		{"over it", 1800 * time.Millisecond, 2000, 0, "CPU per no-op task 900 µs (target <= 600 µs): MISSED", "bare"},
		{"the probe's figure beside it", 1800 * time.Millisecond, 2000, 650 * time.Microsecond,
			"MISSED; the mix probe's claims and commits with no executor take 650 µs a task on this machine, the executors around them 250 µs", ""},
		{"a probe dearer than the job", 1000 * time.Millisecond, 2000, 650 * time.Microsecond,
			"met; the mix probe's claims and commits with no executor take 650 µs a task on this machine, the executors around them 0 µs", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := cpuVerdict(tc.cpu, tc.tasks, tc.bare)
			if !strings.Contains(got, tc.want) {
				t.Errorf("got %q, want it to hold %q", got, tc.want)
			}
			if tc.drop != "" && strings.Contains(got, tc.drop) {
				t.Errorf("got %q, want no %q", got, tc.drop)
			}
		})
	}
}
