package spec

import (
	"strings"
	"testing"
)

func TestToleranceFieldsParse(t *testing.T) {
	src := `
name: t
stages:
  - name: a
    task: noop
    timeout: 30s
    maxBadRecords: 10
    toleratedFailures: {percent: 12.5}
    speculation: {quantile: 0.5, multiplier: 2, maxCopies: 3}
    resources: {memory: 2GiB, maxMemory: 8GiB}
    partitions: {input: {prefix: "s3://bucket/p", dynamicSplit: true}}
`
	j, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s := j.Stages[0]
	if s.Timeout.String() != "30s" || s.MaxBadRecords != 10 || s.ToleratedFailures.Percent != 12.5 ||
		s.Speculation.Quantile != 0.5 || s.Speculation.Multiplier != 2 || s.Speculation.MaxCopies != 3 ||
		s.Resources.Memory != 2<<30 || s.Resources.MaxMemory != 8<<30 || !s.Partitions.Input.DynamicSplit {
		t.Fatalf("parsed %+v", s)
	}
	if got := s.ToleratedFailures.Allowed(17); got != 2 {
		t.Fatalf("12.5%% of 17 = %d, want 2", got)
	}
	// The stored form re-parses to the same settings.
	b, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	j2, err := Parse(b)
	if err != nil {
		t.Fatalf("re-parse: %v", err)
	}
	if *j2.Stages[0].Speculation != *s.Speculation || *j2.Stages[0].Resources != *s.Resources {
		t.Fatalf("round trip: %+v", j2.Stages[0])
	}
	if sp := (&Job{Stages: []Stage{{Speculation: &Speculation{}}}}).StageSpeculation(0); sp.Quantile != 0.75 || sp.Multiplier != 1.5 || sp.MaxCopies != DefaultSpeculativeCopies {
		t.Fatalf("defaults %+v", sp)
	}
}

func TestToleranceFieldsRejected(t *testing.T) {
	for _, tc := range []struct{ name, field, yaml string }{
		{"timeout too short", "stages[0].timeout", "timeout: 10ms"},
		{"timeout not a duration", "stages[0].timeout", "timeout: 5"},
		{"both count and percent", "stages[0].toleratedFailures", "toleratedFailures: {count: 1, percent: 5}"},
		{"percent over 100", "stages[0].toleratedFailures.percent", "toleratedFailures: {percent: 101}"},
		{"negative count", "stages[0].toleratedFailures.count", "toleratedFailures: {count: -1}"},
		{"unknown tolerance key", "stages[0].toleratedFailures.ratio", "toleratedFailures: {ratio: 1}"},
		{"bad records negative", "stages[0].maxBadRecords", "maxBadRecords: -1"},
		{"quantile over 1", "stages[0].speculation.quantile", "speculation: {quantile: 75}"},
		{"multiplier under 1", "stages[0].speculation.multiplier", "speculation: {multiplier: 0.5}"},
		{"copies over limit", "stages[0].speculation.maxCopies", "speculation: {maxCopies: 5000}"},
		{"odd memory", "stages[0].resources.memory", "resources: {memory: 3GiB}"},
		{"max under memory", "stages[0].resources.maxMemory", "resources: {memory: 4GiB, maxMemory: 2GiB}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := "name: t\nstages:\n  - name: a\n    task: noop\n    partitions: {count: 1}\n    " + tc.yaml + "\n"
			_, err := Parse([]byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.field+": ") {
				t.Fatalf("want an error naming %s, got %v", tc.field, err)
			}
		})
	}
}
