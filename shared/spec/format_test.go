package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// An input's format is one of lines, jsonl, csv and parquet (or unset, which is
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
		{"parquet", "parquet", nil},
		{"unknown", "xml", []FieldError{{Field: field, Message: `"xml" is not a format; want lines, jsonl, csv or parquet`, Line: 6}}},
		{"case matters", "CSV", []FieldError{{Field: field, Message: `"CSV" is not a format; want lines, jsonl, csv or parquet`, Line: 6}}},
		{"a compression is not a format", "gzip", []FieldError{{Field: field, Message: `"gzip" is not a format; want lines, jsonl, csv or parquet`, Line: 6}}},
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

// columns names the top-level columns of a Parquet input, each once; it
// means nothing to another format. A Parquet input is never a gzip or
// zstd object, and is not split dynamically (a task reads whole row
// groups).
func TestParquetInput(t *testing.T) {
	t.Parallel()
	const field = "stages[0].partitions.input"
	tests := []struct {
		name, input string
		want        []FieldError
	}{
		{"all columns", "{prefix: s3://bucket/in/, format: parquet}", nil},
		{"some columns", "{prefix: s3://bucket/in/, format: parquet, columns: [id, name]}", nil},
		{"columns of csv", "{prefix: s3://bucket/in/, format: csv, columns: [id]}",
			[]FieldError{{Field: field + ".columns", Message: "applies only to format parquet", Line: 6}}},
		{"columns of the default format", "{prefix: s3://bucket/in/, columns: [id]}",
			[]FieldError{{Field: field + ".columns", Message: "applies only to format parquet", Line: 6}}},
		{"no columns", "{prefix: s3://bucket/in/, format: parquet, columns: []}",
			[]FieldError{{Field: field + ".columns", Message: "must name at least one column; leave it out to read all of them", Line: 6}}},
		{"an empty name", `{prefix: s3://bucket/in/, format: parquet, columns: [id, " "]}`,
			[]FieldError{{Field: field + ".columns[1]", Message: "must name a column", Line: 6}}},
		{"a name twice", "{prefix: s3://bucket/in/, format: parquet, columns: [id, name, id]}",
			[]FieldError{{Field: field + ".columns[2]", Message: `"id" is listed twice`, Line: 6}}},
		{"a gzip object", "{prefix: s3://bucket/in/part-0.parquet.GZ, format: parquet}",
			[]FieldError{{Field: field + ".prefix", Message: "names a gzip or zstd object, but Parquet is not compressed as a whole file: its pages are compressed inside it; name the .parquet objects", Line: 6}}},
		{"a gzip object as lines", "{prefix: s3://bucket/in/part-0.gz}", nil},
		{"dynamic splitting", "{prefix: s3://bucket/in/, format: parquet, dynamicSplit: true}",
			[]FieldError{{Field: field + ".dynamicSplit", Message: "does not apply to parquet: a task reads whole row groups", Line: 6}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := "name: j\nstages:\n  - name: map\n    task: t\n    partitions:\n      input: " + tt.input + "\n"
			j, err := Parse([]byte(doc))
			var got []FieldError
			var ve *ValidationError
			if errors.As(err, &ve) {
				got = ve.Errors
			} else if err != nil {
				t.Fatalf("Parse: %v (%T), want nil or a *ValidationError", err, err)
			}
			// Lines of list elements are their own; compare fields and messages.
			for i := range got {
				got[i].Line = 6
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if tt.name == "some columns" && err == nil {
				if c := j.Stages[0].Partitions.Input.Columns; !cmp.Equal(c, []string{"id", "name"}) {
					t.Errorf("columns %q", c)
				}
			}
		})
	}
}
