package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSkew(t *testing.T) {
	t.Parallel()
	const reduce = `name: s
stages:
  - name: map
    task: m
    partitions: {count: 2}
    shuffle: {partitions: 3}
  - name: reduce
    after: [map]
`
	const join = `name: s
stages:
  - {name: a, task: m, partitions: {count: 2}, shuffle: {partitions: 3}}
  - {name: b, task: m, partitions: {count: 2}, shuffle: {partitions: 3}}
  - name: join
    task: j
    after: [a, b]
`
	tests := []struct {
		name, src string
		want      []FieldError
		skew      *Skew
	}{
		{"combinable", reduce + "    task: r\n    skew: {combinable: true}\n", nil, &Skew{Combinable: true}},
		{"thresholds", reduce + "    task: r\n    skew: {combinable: true, threshold: 8, minBytes: 1MiB}\n", nil,
			&Skew{Combinable: true, Threshold: 8, MinBytes: 1 << 20}},
		{"join", join + "    skew: {join: true}\n", nil, &Skew{Join: true}},
		{"one shuffle needs combinable", reduce + "    task: r\n    skew: {}\n",
			[]FieldError{{Field: "stages[1].skew.combinable", Message: "must be true: a stage reading one shuffle splits a partition only if its function can reduce its own output (docs/job-spec.md, Skew)"}}, nil},
		{"a join needs join", join + "    skew: {combinable: true}\n",
			[]FieldError{{Field: "stages[2].skew.join", Message: "must be true: a stage joining several shuffles splits a partition only if its output for a key depends on matching pairs alone (docs/job-spec.md, Skew)"}}, nil},
		{"both", join + "    skew: {combinable: true, join: true}\n",
			[]FieldError{{Field: "stages[2].skew", Message: "set one of combinable (a reduction over one shuffle) and join (a join of several)"}}, nil},
		{"no shuffle", "name: s\nstages:\n  - {name: a, task: m, partitions: {count: 2}, skew: {combinable: true}}\n",
			[]FieldError{{Field: "stages[0].skew", Message: "only a stage that reads a shuffle can split its skewed partitions"}}, nil},
		{"lambda", reduce + "    lambda: fn\n    skew: {combinable: true}\n",
			[]FieldError{{Field: "stages[1].skew", Message: "a lambda stage reads whole objects of its shuffle, which cannot be split; use a task or exec stage"}}, nil},
		{"range", `name: s
stages:
  - {name: map, task: m, partitions: {count: 2}, shuffle: {partitions: 3, by: range}}
  - {name: reduce, task: r, after: [map], skew: {combinable: true}}
`, []FieldError{{Field: "stages[1].skew", Message: `stage "map"'s shuffle is by range, whose partitions are key ranges drawn by the reducers; skew splits hash partitions only`}}, nil},
		{"combinable cannot shuffle", reduce + "    task: r\n    shuffle: {partitions: 2}\n    skew: {combinable: true}\n  - {name: last, task: l, after: [reduce]}\n",
			[]FieldError{{Field: "stages[1].skew.combinable", Message: "its pieces' outputs are reduced again as lines: the stage cannot shuffle, set output or tolerate failures"}}, nil},
		{"threshold", reduce + "    task: r\n    skew: {combinable: true, threshold: 1}\n",
			[]FieldError{{Field: "stages[1].skew.threshold", Message: "must be between 2 and 1000 (times the median partition)"}}, nil},
		{"unknown key", reduce + "    task: r\n    skew: {combinable: true, factor: 3}\n",
			[]FieldError{{Field: "stages[1].skew.factor", Message: "unknown field"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Parse([]byte(tt.src))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				got := j.Stages[len(j.Stages)-1].Skew
				if diff := cmp.Diff(tt.skew, got); diff != "" {
					t.Errorf("skew (-want +got):\n%s", diff)
				}
				b, err := j.Encode()
				if err != nil {
					t.Fatal(err)
				}
				again, err := Parse(b)
				if err != nil {
					t.Fatalf("re-parse %s: %v", b, err)
				}
				if diff := cmp.Diff(j, again); diff != "" {
					t.Errorf("round trip (-first +again):\n%s", diff)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse = %v, want a *ValidationError", err)
			}
			for i := range ve.Errors {
				ve.Errors[i].Line = 0
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
