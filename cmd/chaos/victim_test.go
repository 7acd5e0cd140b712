package main

import (
	"slices"
	"testing"

	"github.com/batchwork/batchwork/cmd/chaos/check"
)

func TestVictimsSpareATasksLastAttempts(t *testing.T) {
	claim := func(partition, attempt int) check.Start {
		return check.Start{Job: "j", Stage: 0, Partition: partition, Attempt: attempt}
	}
	done := func(partitions ...int) map[check.Attempt]bool {
		m := map[check.Attempt]bool{}
		for _, p := range partitions {
			m[check.Attempt{Job: "j", Partition: p}] = true
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
		{"early attempts: anyone", map[string][]check.Start{"e0": {claim(0, 1)}, "e1": {claim(1, 6)}}, nil, 8, []int{0, 1, 2}},
		{"second to last attempt spared", map[string][]check.Start{"e1": {claim(1, 7)}}, nil, 8, []int{0, 2}},
		{"last attempt spared", map[string][]check.Start{"e2": {claim(0, 1), claim(2, 8)}}, nil, 8, []int{0, 1}},
		{"committed task no longer spared", map[string][]check.Start{"e1": {claim(1, 8)}}, done(1), 8, []int{0, 1, 2}},
		{"the examples' budget of 3", map[string][]check.Start{"e0": {claim(0, 2)}, "e1": {claim(1, 1)}}, nil, 3, []int{1, 2}},
		{"everyone spared", map[string][]check.Start{"e0": {claim(0, 8)}, "e1": {claim(1, 7)}, "e2": {claim(2, 8)}}, nil, 8, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := victims(names, c.claims, c.committed, c.budget); !slices.Equal(got, c.want) {
				t.Fatalf("victims = %v, want %v", got, c.want)
			}
		})
	}
}
