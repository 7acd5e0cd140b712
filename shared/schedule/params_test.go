package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/google/go-cmp/cmp"
)

// A firing's params are the schedule's and its slot's, in UTC.
func TestFiringParams(t *testing.T) {
	t.Parallel()
	s := &Schedule{Params: map[string]string{"region": "eu"}}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	got := s.FiringParams(time.Date(2026, 3, 1, 22, 30, 0, 0, ny))
	want := map[string]string{"region": "eu", "scheduledTime": "2026-03-02T03:30:00Z", "scheduledDate": "2026-03-02"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// A schedule's params are checked against its spec at creation, each
// problem named under the schedule's fields.
func TestScheduleParamsChecked(t *testing.T) {
	t.Parallel()
	const jobSpec = `{"name":"r","params":{"region":null},"stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"s3://bkt/${params.region}/${params.scheduledDate}/"}}}]}`
	tests := []struct {
		name, params string
		want         []spec.FieldError
	}{
		{name: "valid", params: `{"region":"eu"}`},
		{name: "required unset", params: `{}`,
			want: []spec.FieldError{{Field: "spec.params.region", Message: "has no default and no value: set it (batchwork submit --param region=VALUE; POST /jobs?param=region=VALUE)"},
				{Field: "spec.stages[0].partitions.input.prefix", Message: "${params.region} has no value (see params.region)"}}},
		{name: "reserved", params: `{"region":"eu","scheduledDate":"x"}`,
			want: []spec.FieldError{{Field: "params.scheduledDate", Message: "is set by each firing to its scheduled time; a schedule cannot set it"}}},
		{name: "undeclared", params: `{"region":"eu","zone":"a"}`,
			want: []spec.FieldError{{Field: "params", Message: `"zone" is not a parameter of this spec (it declares region)`}}},
		{name: "not an object", params: `["a"]`,
			want: []spec.FieldError{{Field: "params", Message: "must be an object of names to string values"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`{"name":"n","expression":"@daily","params":` + tt.params + `,"spec":` + jobSpec + `}`))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var ve *spec.ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse: %v, want a *spec.ValidationError", err)
			}
			if d := cmp.Diff(tt.want, ve.Errors); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}

// A schedule's jobs publish only to a folder each firing resolves to its
// own: two slots a second apart must resolve it differently, whatever its
// text. The escape $${params.scheduledTime} is that text, resolved to one
// literal folder for every firing.
func TestScheduleOutputPerSlot(t *testing.T) {
	t.Parallel()
	tests := []struct {
		output string
		ok     bool
	}{
		{"", true},
		{"outputs:daily/${params.scheduledTime}/", true},
		{"outputs:daily/${params.scheduledDate}/${params.scheduledTime}/", true},
		{"outputs:daily/", false},
		{"outputs:daily/$${params.scheduledTime}/", false},
		{"outputs:daily/${params.scheduledDate}/", false},
		{"outputs:daily/${params.region}/", false},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			t.Parallel()
			job := `{"name":"r","params":{"region":null},"output":"` + tt.output + `","stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`
			_, err := Parse([]byte(`{"name":"n","expression":"@daily","params":{"region":"eu"},"spec":` + job + `}`))
			if tt.ok {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var ve *spec.ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "spec.output" {
				t.Fatalf("Parse: %v, want one error, on spec.output", err)
			}
		})
	}
}
