package spec

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The split size has a floor, checked where a spec is parsed, so a
// submission of "splitSize: 1" is refused with an error naming the field
// instead of planning millions of one-byte tasks.
func TestSplitSizeFloor(t *testing.T) {
	t.Parallel()
	const field = "stages[0].partitions.input.splitSize"
	floor := fmt.Sprintf("must be at least %d (bytes)", MinSplitSize)
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
