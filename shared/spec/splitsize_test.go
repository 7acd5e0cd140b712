package spec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The split size has a floor and a cap, checked where a spec is parsed:
// "splitSize: 1" is refused with an error naming the field instead of
// planning millions of one-byte tasks, and a split too large for an
// executor's memory (one task reading its whole split must fit in the 1 GB
// Lambda executor beside its buffered outputs) is refused the same way,
// instead of crashing the executor at run time.
func TestSplitSizeBounds(t *testing.T) {
	t.Parallel()
	const field = "stages[0].partitions.input.splitSize"
	floor := fmt.Sprintf("must be at least %d (bytes)", MinSplitSize)
	limit := "must be at most 268435456 (bytes, 256 MiB), so that a task's split fits in an executor's memory"
	tests := []struct {
		name string
		size string // the YAML value of splitSize
		want []FieldError
	}{
		{"one byte", "1", []FieldError{{Field: field, Message: floor, Line: 6}}},
		{"one KiB", "1KiB", []FieldError{{Field: field, Message: floor, Line: 6}}},
		{"one byte under the floor", fmt.Sprint(MinSplitSize - 1), []FieldError{{Field: field, Message: floor, Line: 6}}},
		{"the floor", fmt.Sprint(MinSplitSize), nil},
		{"4 KiB with a unit", "4KiB", nil},
		{"the test suites' 8,000 bytes", "8000", nil},
		{"the default", "64MiB", nil},
		{"the cap", "256MiB", nil},
		{"one byte over the cap", "268435457", []FieldError{{Field: field, Message: limit, Line: 6}}},
		{"512 MiB", "512MiB", []FieldError{{Field: field, Message: limit, Line: 6}}},
		{"the executor's whole memory", "1GiB", []FieldError{{Field: field, Message: limit, Line: 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := "name: j\nstages:\n  - name: map\n    task: t\n    partitions:\n      input: {prefix: s3://bucket/in/, splitSize: " + tt.size + "}\n"
			_, err := Parse([]byte(doc))
			var got []FieldError
			var ve *ValidationError
			if errors.As(err, &ve) {
				got = ve.Errors
			} else if err != nil {
				t.Fatalf("Parse: %v (%T), want nil or a *ValidationError", err, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
