package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A stage's output is lines or Parquet of a declared schema: every
// mistake is refused at parse with the field that holds it, and a good
// schema parses to the columns in their order.
func TestStageOutput(t *testing.T) {
	t.Parallel()
	const head = "name: j\nstages:\n  - name: s\n    partitions: {count: 1}\n"
	tests := []struct {
		name  string
		stage string // YAML lines of the stage after partitions
		doc   string // the whole spec, instead of head+stage
		want  []FieldError
	}{
		{name: "none", stage: ""},
		{name: "lines", stage: "    task: t\n    output: {format: lines}\n"},
		{name: "parquet, every type", stage: "    task: t\n    output:\n      format: parquet\n      schema:\n" +
			"        - {name: s, type: string}\n        - {name: i, type: int32, nullable: true}\n        - {name: l, type: int64}\n" +
			"        - {name: f, type: float}\n        - {name: d, type: double}\n        - {name: b, type: boolean}\n" +
			"        - {name: ts, type: timestamp}\n        - {name: day, type: date}\n        - {name: amt, type: 'decimal(10, 2)'}\n" +
			"        - {name: big, type: 'decimal(38,0)'}\n        - {name: raw, type: binary}\n        - {name: tags, type: 'list<string>'}\n"},
		{name: "exec", stage: "    exec: [p]\n    output: {format: parquet, schema: [{name: a, type: string}]}\n"},
		{name: "unknown format", stage: "    task: t\n    output: {format: avro}\n",
			want: []FieldError{{Field: "stages[0].output.format", Message: `"avro" is not an output format; want lines or parquet`, Line: 6}}},
		{name: "schema on lines", stage: "    task: t\n    output: {schema: [{name: a, type: string}]}\n",
			want: []FieldError{{Field: "stages[0].output.schema", Message: "applies only to format parquet", Line: 6}}},
		{name: "no schema", stage: "    task: t\n    output: {format: parquet}\n",
			want: []FieldError{{Field: "stages[0].output.schema", Message: "is required for format parquet: a list of columns, each {name, type, nullable}", Line: 6}}},
		{name: "empty schema", stage: "    task: t\n    output: {format: parquet, schema: []}\n",
			want: []FieldError{{Field: "stages[0].output.schema", Message: "is required for format parquet: a list of columns, each {name, type, nullable}", Line: 6}}},
		{name: "bad columns", stage: "    task: t\n    output:\n      format: parquet\n      schema:\n" +
			"        - {name: a, type: string}\n        - {name: a, type: int64}\n        - {name: 'b.c', type: string}\n" +
			"        - {type: string}\n        - {name: d}\n        - {name: e, type: int}\n        - {name: f, type: 'decimal(39,2)'}\n" +
			"        - {name: g, type: 'decimal(5,6)'}\n        - {name: h, type: 'list<list<int32>>'}\n        - {name: i, type: string, size: 3}\n",
			want: []FieldError{
				{Field: "stages[0].output.schema[9].size", Message: "unknown field", Line: 18},
			}},
		{name: "bad columns, decoded", stage: "    task: t\n    output:\n      format: parquet\n      schema:\n" +
			"        - {name: a, type: string}\n        - {name: a, type: int64}\n        - {name: 'b.c', type: string}\n" +
			"        - {type: string}\n        - {name: d}\n        - {name: e, type: int}\n        - {name: f, type: 'decimal(39,2)'}\n" +
			"        - {name: g, type: 'decimal(5,6)'}\n        - {name: h, type: 'list<list<int32>>'}\n",
			want: []FieldError{
				{Field: "stages[0].output.schema[1].name", Message: `duplicate column "a" (also schema[0])`, Line: 10},
				{Field: "stages[0].output.schema[2].name", Message: `"b.c" must be at most 128 letters, digits and underscores, not starting with a digit`, Line: 11},
				{Field: "stages[0].output.schema[3].name", Message: "is required", Line: 12},
				{Field: "stages[0].output.schema[4].type", Message: "is required", Line: 13},
				{Field: "stages[0].output.schema[5].type", Message: `"int" is not a column type; want one of string, int32, int64, float, double, boolean, timestamp, date, binary, decimal(p,s) or list<T>`, Line: 14},
				{Field: "stages[0].output.schema[6].type", Message: `"decimal(39,2)": the precision must be between 1 and 38`, Line: 15},
				{Field: "stages[0].output.schema[7].type", Message: `"decimal(5,6)": the scale must be at most the precision`, Line: 16},
				{Field: "stages[0].output.schema[8].type", Message: `"list<list<int32>>": a list's elements must be scalars, not lists`, Line: 17},
			}},
		{name: "lambda", stage: "    lambda: fn\n    output: {format: parquet, schema: [{name: a, type: string}]}\n",
			want: []FieldError{{Field: "stages[0].output.format", Message: "a lambda stage's function writes its output objects itself, so the executor cannot write them as Parquet: write Parquet from the function, or run the stage as task or exec", Line: 6}}},
		{name: "shuffle", doc: "name: j\nstages:\n  - name: m\n    task: t\n    partitions: {count: 1}\n    shuffle: {partitions: 2}\n" +
			"    output: {format: parquet, schema: [{name: a, type: string}]}\n  - name: r\n    task: t\n    after: [m]\n",
			want: []FieldError{{Field: "stages[0].output.format", Message: "parquet is for a stage's published outputs; this stage shuffles its records to the stages after it, which read them as key\\tvalue lines: write Parquet from the stage that reads the shuffle", Line: 7}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			doc := tt.doc
			if doc == "" {
				doc = head + tt.stage
				if !strings.Contains(tt.stage, "task:") && !strings.Contains(tt.stage, "exec:") && !strings.Contains(tt.stage, "lambda:") {
					doc += "    task: t\n"
				}
			}
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
			if err != nil || j.Stages[0].Output == nil {
				return
			}
			// The stored form (JSON) parses back to the same output.
			b, err := j.Encode()
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(b)
			if err != nil {
				t.Fatalf("re-parse: %v", err)
			}
			if diff := cmp.Diff(j.Stages[0].Output, back.Stages[0].Output); diff != "" {
				t.Errorf("JSON round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseColumnType(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want ColumnType
	}{
		{"string", ColumnType{Kind: ColString}},
		{"decimal(9,2)", ColumnType{Kind: ColDecimal, Precision: 9, Scale: 2}},
		{" decimal( 18 , 0 ) ", ColumnType{Kind: ColDecimal, Precision: 18}},
		{"list<timestamp>", ColumnType{Kind: ColList, Elem: &ColumnType{Kind: ColTimestamp}}},
		{"list<decimal(4,1)>", ColumnType{Kind: ColList, Elem: &ColumnType{Kind: ColDecimal, Precision: 4, Scale: 1}}},
	}
	for _, tt := range tests {
		got, err := ParseColumnType(tt.in)
		if err != nil {
			t.Errorf("ParseColumnType(%q): %v", tt.in, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseColumnType(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
	for _, bad := range []string{"", "list<string", "decimal(0,0)", "Decimal(3,1)", "list<>", "int"} {
		if _, err := ParseColumnType(bad); err == nil {
			t.Errorf("ParseColumnType(%q): nil error, want one", bad)
		}
	}
}
