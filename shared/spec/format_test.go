package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An input's format is one of lines, jsonl and csv (or unset, which is
// lines); anything else is refused where the spec is parsed, with an error
// naming the field and the formats there are.
func TestInputFormat(t *testing.T) {
	t.Parallel()
	const field = "stages[0].partitions.input.format"
	tests := []struct {
		name   string
		format string // the YAML of the input's format, "" for none
		want   []FieldError
	}{
		{"unset", "", nil},
		{"lines", "lines", nil},
		{"jsonl", "jsonl", nil},
		{"csv", "csv", nil},
		{"unknown", "xml", []FieldError{{Field: field, Message: `"xml" is not a format; want lines, jsonl or csv`, Line: 6}}},
		{"case matters", "CSV", []FieldError{{Field: field, Message: `"CSV" is not a format; want lines, jsonl or csv`, Line: 6}}},
		{"a compression is not a format", "gzip", []FieldError{{Field: field, Message: `"gzip" is not a format; want lines, jsonl or csv`, Line: 6}}},
		{"empty string", `""`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := "{prefix: s3://bucket/in/}"
			if tt.format != "" {
				in = "{prefix: s3://bucket/in/, format: " + tt.format + "}"
			}
			doc := "name: j\nstages:\n  - name: map\n    task: t\n    partitions:\n      input: " + in + "\n"
			j, err := Parse([]byte(doc))
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
			if err == nil && tt.format != "" && tt.format != `""` && j.Stages[0].Partitions.Input.Format != tt.format {
				t.Errorf("format %q, want %q", j.Stages[0].Partitions.Input.Format, tt.format)
			}
		})
	}
}
