package main

import (
	"slices"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/chaos/check"
)

func TestVictimsSpareATasksLastAttempts(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	claim := func(partition, attempt int, age time.Duration) check.Start {
		return check.Start{Job: "j", Stage: 0, Partition: partition, Attempt: attempt, At: now.Add(-age)}
	}
	task := func(p int) check.Attempt { return check.Attempt{Job: "j", Partition: p} }
	// latestOf is each task's latest attempt among the claims.
	latestOf := func(claims map[string][]check.Start) map[check.Attempt]int {
		m := map[check.Attempt]int{}
		for _, cs := range claims {
			for _, c := range cs {
				m[task(c.Partition)] = max(m[task(c.Partition)], c.Attempt)
			}
		}
		return m
	}
	names := []string{"e0", "e1", "e2"}
	cases := []struct {
		name      string
		claims    map[string][]check.Start
		committed map[check.Attempt]bool
		budget    int
		want      []int
	}{
		{"early attempts: anyone", map[string][]check.Start{"e0": {claim(0, 1, time.Second)}, "e1": {claim(1, 6, time.Second)}}, nil, 8, []int{0, 1, 2}},
		{"second to last attempt spared", map[string][]check.Start{"e1": {claim(1, 7, time.Second)}}, nil, 8, []int{0, 2}},
		{"last attempt spared", map[string][]check.Start{"e2": {claim(0, 1, time.Second), claim(2, 8, time.Second)}}, nil, 8, []int{0, 1}},
		{"committed task no longer spared", map[string][]check.Start{"e1": {claim(1, 8, time.Second)}}, map[check.Attempt]bool{task(1): true}, 8, []int{0, 1, 2}},
		{"a later attempt elsewhere: not held any more", map[string][]check.Start{"e0": {claim(0, 7, 5*time.Second)}, "e1": {claim(0, 8, time.Second)}}, nil, 8, []int{0, 2}},
		{"an old claim (the task ended unseen) spares no longer", map[string][]check.Start{"e0": {claim(0, 8, spareFor)}}, nil, 8, []int{0, 1, 2}},
		{"the examples' budget of 3", map[string][]check.Start{"e0": {claim(0, 2, time.Second)}, "e1": {claim(1, 1, time.Second)}}, nil, 3, []int{1, 2}},
		{"everyone spared", map[string][]check.Start{"e0": {claim(0, 8, time.Second)}, "e1": {claim(1, 7, time.Second)}, "e2": {claim(2, 8, time.Second)}}, nil, 8, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := victims(names, c.claims, latestOf(c.claims), c.committed, c.budget, now); !slices.Equal(got, c.want) {
				t.Fatalf("victims = %v, want %v", got, c.want)
			}
		})
	}
}
