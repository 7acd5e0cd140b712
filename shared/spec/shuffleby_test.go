package spec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestShuffleBy(t *testing.T) {
	t.Parallel()
	base := `name: s
stages:
  - name: map
    %s
    partitions: {count: 2}
    shuffle: {partitions: 3%s}
  - name: reduce
    %s
    after: [map]
`
	tests := []struct {
		name           string
		mapRun, by, rd string
		want           []FieldError
		ranged         bool
	}{
		{"default is hash", "task: m", "", "task: r", nil, false},
		{"hash", "task: m", ", by: hash", "task: r", nil, false},
		{"range", "task: m", ", by: range", "task: r", nil, true},
		{"range from exec to exec", "exec: [m]", ", by: range", "exec: [r]", nil, true},
		{"unknown", "task: m", ", by: sorted", "task: r", []FieldError{{Field: "stages[0].shuffle.by",
			Message: `"sorted" is not a partitioning; use "hash" (the default) or "range"`}}, false},
		{"lambda writer", "lambda: fn", ", by: range", "task: r", []FieldError{{Field: "stages[0].shuffle.by",
			Message: "a lambda stage cannot write a range shuffle (its function writes its own objects, not sorted runs); use a task or exec stage, or by: hash"}}, true},
		{"lambda reader", "task: m", ", by: range", "lambda: fn", []FieldError{{Field: "stages[0].shuffle.by",
			Message: `stage "reduce", a lambda stage, reads this shuffle; a lambda function cannot read a range shuffle (it reads whole objects, not merged sorted runs); use a task or exec stage, or by: hash`}}, true},
		{"lambda hash is fine", "lambda: fn", ", by: hash", "lambda: fn", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := []byte(fmt.Sprintf(base, tt.mapRun, tt.by, tt.rd))
			j, err := Parse(src)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if got := j.Stages[0].Shuffle.Ranged(); got != tt.ranged {
					t.Errorf("Ranged() = %v, want %v", got, tt.ranged)
				}
				// The stored form round-trips.
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
				ve.Errors[i].Line = 0 // the field names the place
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
	var none *Shuffle
	if none.Ranged() {
		t.Error("a nil shuffle is ranged")
	}
}

// A join reads partition p of each shuffle, so a range shuffle (whose
// boundaries are its own) may not be one of its sources.
func TestRangeShuffleIntoAJoinRefused(t *testing.T) {
	t.Parallel()
	const src = `name: j
stages:
  - {name: a, task: m, partitions: {count: 2}, shuffle: {partitions: 3, by: %s}}
  - {name: b, task: m, partitions: {count: 2}, shuffle: {partitions: 3}}
  - {name: j, task: r, after: [a, b]}
`
	if _, err := Parse([]byte(fmt.Sprintf(src, "hash"))); err != nil {
		t.Fatalf("hash join: %v", err)
	}
	_, err := Parse([]byte(fmt.Sprintf(src, "range")))
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Parse = %v, want a *ValidationError", err)
	}
	want := []FieldError{{Field: "stages[0].shuffle.by",
		Message: `stage "j" joins this shuffle with another; a join reads partition p of each shuffle, which only hash partitioning makes hold the same keys; use by: hash`, Line: 3}}
	if diff := cmp.Diff(want, ve.Errors); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}
