package spec

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// partitions.inputs lists several prefixes, each checked as an input is,
// with errors naming inputs[k]; exactly one of count, input and inputs.
func TestInputsValidation(t *testing.T) {
	t.Parallel()
	const head = "name: j\nstages:\n  - name: map\n    task: t\n    partitions:\n"
	tests := []struct {
		name  string
		parts string // the YAML under partitions:, indented by 6
		want  []FieldError
	}{
		{"two inputs", "      inputs:\n        - {prefix: s3://bucket/a/, format: csv}\n        - {prefix: s3://bucket/b/, format: jsonl}\n", nil},
		{"named inputs", "      inputs:\n        - {name: orders, prefix: s3://bucket/a/}\n        - {name: customers, prefix: s3://bucket/b/}\n", nil},
		{"a name on a single input", "      input: {name: orders, prefix: s3://bucket/a/}\n", nil},
		{"empty list", "      inputs: []\n", []FieldError{
			{Field: "stages[0].partitions.inputs", Message: "must list at least one input; leave it out for a stage partitioned by count", Line: 6},
		}},
		{"input and inputs", "      input: {prefix: s3://bucket/a/}\n      inputs:\n        - {prefix: s3://bucket/b/}\n", []FieldError{
			{Field: "stages[0].partitions", Message: "count, input and inputs are mutually exclusive: give exactly one", Line: 5},
		}},
		{"count and inputs", "      count: 2\n      inputs:\n        - {prefix: s3://bucket/b/}\n", []FieldError{
			{Field: "stages[0].partitions", Message: "count, input and inputs are mutually exclusive: give exactly one", Line: 5},
		}},
		{"a bad prefix names its input", "      inputs:\n        - {prefix: s3://bucket/a/}\n        - {prefix: /tmp/b}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[1].prefix", Message: `"/tmp/b" must have the form s3://bucket/prefix, or inputs:<path> for a path in your inputs area`, Line: 8},
		}},
		{"a bad format names its input", "      inputs:\n        - {prefix: s3://bucket/a/, format: xml}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[0].format", Message: `"xml" is not a format; want lines, jsonl, csv or parquet`, Line: 7},
		}},
		{"columns on csv", "      inputs:\n        - {prefix: s3://bucket/a/, format: csv, columns: [a]}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[0].columns", Message: "applies only to format parquet", Line: 7},
		}},
		{"duplicate names", "      inputs:\n        - {name: x, prefix: s3://bucket/a/}\n        - {name: x, prefix: s3://bucket/b/}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[1].name", Message: `"x" names two inputs (also stages[0].partitions.inputs[0]); give each input its own name`, Line: 8},
		}},
		{"a name equal to another input's index", "      inputs:\n        - {name: \"1\", prefix: s3://bucket/a/}\n        - {prefix: s3://bucket/b/}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[1].name", Message: `"1" names two inputs (also stages[0].partitions.inputs[0]); give each input its own name`, Line: 8},
		}},
		{"a bad name", "      inputs:\n        - {name: a/b, prefix: s3://bucket/a/}\n", []FieldError{
			{Field: "stages[0].partitions.inputs[0].name", Message: `"a/b" must start with a letter or digit and contain only letters, digits, '_' and '-'`, Line: 7},
		}},
		{"too many", "      inputs:\n" + strings.Repeat("        - {prefix: s3://bucket/a/}\n", MaxInputs+1), []FieldError{
			{Field: "stages[0].partitions.inputs", Message: "lists 17 inputs; at most 16 are allowed", Line: 6},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(head + tt.parts))
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

// A parsed inputs list keeps each input's fields, survives the stored
// encoding, and tells each input's source name.
func TestInputsParseAndSources(t *testing.T) {
	t.Parallel()
	doc := head2 + "      inputs:\n        - {name: orders, prefix: s3://bucket/o/, format: csv, splitSize: 1MiB, allowEmpty: true}\n        - {prefix: s3://bucket/c/, format: jsonl, dynamicSplit: true}\n"
	j, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	p := j.Stages[0].Partitions
	want := []Input{
		{Name: "orders", Prefix: "s3://bucket/o/", Format: FormatCSV, SplitSize: 1 << 20, AllowEmpty: true},
		{Prefix: "s3://bucket/c/", Format: FormatJSONL, DynamicSplit: true},
	}
	if diff := cmp.Diff(want, p.Inputs); diff != "" {
		t.Errorf("inputs (-want +got):\n%s", diff)
	}
	b, err := j.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(Encode): %v", err)
	}
	if diff := cmp.Diff(j, back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	var names []string
	for k, in := range p.InputList() {
		names = append(names, in.SourceName(k))
	}
	if !slices.Equal(names, []string{"orders", "1"}) {
		t.Errorf("source names %q, want [orders 1]", names)
	}
	if p.InputAt(1) != &p.Inputs[1] || p.InputAt(2) != nil || p.InputAt(-1) != nil {
		t.Error("InputAt does not index Inputs")
	}
	single := &Partitions{Input: &Input{Prefix: "s3://bucket/x/"}}
	if got := single.InputList(); len(got) != 1 || got[0] != single.Input || got[0].SourceName(0) != "0" {
		t.Errorf("a single input's list %v", got)
	}
	if (&Partitions{Count: 3}).HasInput() || (*Partitions)(nil).HasInput() {
		t.Error("a counted stage has inputs")
	}
}

const head2 = "name: j\nstages:\n  - name: map\n    task: t\n    partitions:\n"

// A stage after two shuffles of the same partition count reads both.
func TestShuffleSources(t *testing.T) {
	t.Parallel()
	j := &Job{Name: "j", Stages: []Stage{
		{Name: "a", Task: "t", Partitions: &Partitions{Count: 1}, Shuffle: &Shuffle{Partitions: 4}},
		{Name: "b", Task: "t", Partitions: &Partitions{Count: 1}, Shuffle: &Shuffle{Partitions: 4}},
		{Name: "c", Task: "t", Partitions: &Partitions{Count: 1}},
		{Name: "join", Task: "t", After: []string{"b", "c", "a"}},
	}}
	if err := j.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := j.ShuffleSources(3); !slices.Equal(got, []int{1, 0}) {
		t.Errorf("ShuffleSources(3) = %v, want [1 0] (after order)", got)
	}
	if src, ok := j.ShuffleSource(3); src != 1 || !ok {
		t.Errorf("ShuffleSource(3) = %d, %t; want the first, 1", src, ok)
	}
	if got := j.ShuffleSources(0); got != nil {
		t.Errorf("ShuffleSources(0) = %v, want none", got)
	}
}
