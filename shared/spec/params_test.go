package spec

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// paramsSpec uses a placeholder in every field that may hold one.
const paramsSpec = `
name: daily
params:
  date: null
  region: eu
  limit: 7
output: s3://out-bucket/daily/${params.date}/
stages:
  - name: load
    exec: [load, "--day=${params.date}", --region, "${params.region}", "${HOME}", "$${params.date}"]
    partitions:
      input: {prefix: "s3://in-bucket/raw/${params.region}/${params.date}/"}
  - name: fan
    task: t.fan
    partitions:
      count: 2
      params: [{day: "${params.date}", n: "${params.limit}"}, {day: fixed}]
  - name: both
    task: t.both
    partitions:
      inputs:
        - {name: a, prefix: "s3://in-bucket/a/${params.date}/"}
        - {name: b, prefix: "s3://in-bucket/b/${params.region}/", format: jsonl}
`

func resolveErrors(t *testing.T, err error) []FieldError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("Resolve: %v, want a *ValidationError", err)
	}
	return ve.Errors
}

// Resolution replaces every placeholder, keeps the template unchanged,
// and records every value (defaults included) in the resolved spec.
func TestResolveEverywhere(t *testing.T) {
	t.Parallel()
	j, err := Parse([]byte(paramsSpec))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	before := j.Hash()
	r, err := j.Resolve(map[string]string{"date": "2026-03-01", "region": "us"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if j.Hash() != before {
		t.Error("Resolve changed the template")
	}
	checks := []struct{ what, got, want string }{
		{"output", r.Output, "s3://out-bucket/daily/2026-03-01/"},
		{"prefix", r.Stages[0].Partitions.Input.Prefix, "s3://in-bucket/raw/us/2026-03-01/"},
		{"exec[0]", r.Stages[0].Exec[0], "load"},
		{"exec[1]", r.Stages[0].Exec[1], "--day=2026-03-01"},
		{"exec[3]", r.Stages[0].Exec[3], "us"},
		{"exec[4] (a shell's, left alone)", r.Stages[0].Exec[4], "${HOME}"},
		{"exec[5] (escaped)", r.Stages[0].Exec[5], "${params.date}"},
		{"params[0].day", r.Stages[1].Partitions.Params[0]["day"], "2026-03-01"},
		{"params[0].n (a YAML integer default)", r.Stages[1].Partitions.Params[0]["n"], "7"},
		{"params[1].day", r.Stages[1].Partitions.Params[1]["day"], "fixed"},
		{"inputs[0].prefix", r.Stages[2].Partitions.Inputs[0].Prefix, "s3://in-bucket/a/2026-03-01/"},
		{"inputs[1].prefix", r.Stages[2].Partitions.Inputs[1].Prefix, "s3://in-bucket/b/us/"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.what, c.got, c.want)
		}
	}
	if diff := cmp.Diff(map[string]string{"date": "2026-03-01", "region": "us", "limit": "7"}, r.RunParams()); diff != "" {
		t.Errorf("RunParams (-want +got):\n%s", diff)
	}
	// The resolved spec is stored and a rerun parses it again: its
	// escaped text stays literal because it is not resolved again.
	b, err := r.Encode()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(b)
	if err != nil {
		t.Fatalf("Parse(resolved): %v", err)
	}
	if again.Hash() != r.Hash() {
		t.Error("the resolved spec does not survive Encode and Parse")
	}
}

// The values are part of the spec's hash, so the same idempotency key
// with other values is a conflict, even for a parameter no field uses.
func TestResolvedHashCoversParams(t *testing.T) {
	t.Parallel()
	j, err := Parse([]byte(`{"name":"n","params":{"unused":"a"},"stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := j.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := j.Resolve(map[string]string{"unused": "b"})
	if err != nil {
		t.Fatal(err)
	}
	same, err := j.Resolve(map[string]string{"unused": "a"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() == b.Hash() {
		t.Error("different values, same hash")
	}
	if a.Hash() != same.Hash() {
		t.Error("the default given explicitly hashes differently from the default")
	}
}

// A spec without params or placeholders resolves to itself.
func TestResolveNoParams(t *testing.T) {
	t.Parallel()
	j := wordCountJob()
	r, err := j.Resolve(nil)
	if err != nil || r != j {
		t.Fatalf("Resolve = %p, %v; want the job itself", r, err)
	}
}

// The reserved names need no declaration: a schedule's firing sets them.
func TestResolveReserved(t *testing.T) {
	t.Parallel()
	j, err := Parse([]byte(`{"name":"n","stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"inputs:logs/${params.scheduledDate}/"}}}]}`))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	r, err := j.Resolve(map[string]string{ParamScheduledDate: "2026-03-01", ParamScheduledTime: "2026-03-01T02:30:00Z"})
	if err != nil {
		t.Fatalf("Resolve: %v", err)
	}
	if got := r.Stages[0].Partitions.Input.Prefix; got != "inputs:logs/2026-03-01/" {
		t.Errorf("prefix = %q", got)
	}
	_, err = j.Resolve(nil)
	want := []FieldError{{Field: "stages[0].partitions.input.prefix",
		Message: "${params.scheduledDate} names a parameter this spec does not declare (it declares no params)"}}
	if diff := cmp.Diff(want, resolveErrors(t, err)); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// Every problem is a FieldError naming the field that holds it.
func TestResolveErrors(t *testing.T) {
	t.Parallel()
	const head = `{"name":"n","params":{"date":null,"region":"eu"},`
	tests := []struct {
		name  string
		spec  string
		given map[string]string
		want  []FieldError
	}{
		{
			name: "required without value",
			spec: head + `"stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"s3://bkt/${params.date}/"}}}]}`,
			want: []FieldError{
				{Field: "params.date", Message: "has no default and no value: set it (batchwork submit --param date=VALUE; POST /jobs?param=date=VALUE)"},
				{Field: "stages[0].partitions.input.prefix", Message: "${params.date} has no value (see params.date)"},
			},
		},
		{
			name:  "unknown given name",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`,
			given: map[string]string{"date": "d", "dat": "x"},
			want:  []FieldError{{Field: "param", Message: `"dat" is not a parameter of this spec (it declares date, region)`}},
		},
		{
			name:  "unknown placeholder in exec",
			spec:  head + `"stages":[{"name":"s","exec":["p","${params.day}"],"partitions":{"count":1}}]}`,
			given: map[string]string{"date": "d"},
			want: []FieldError{{Field: "stages[0].exec[1]",
				Message: "${params.day} names a parameter this spec does not declare (it declares date, region)"}},
		},
		{
			name:  "malformed placeholder in output",
			spec:  head + `"output":"s3://bkt/${params}/","stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`,
			given: map[string]string{"date": "d"},
			want: []FieldError{{Field: "output",
				Message: `"${params}" is not a parameter reference: write ${params.NAME}, or $${params for the text itself`}},
		},
		{
			name:  "unclosed placeholder in partition params",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"count":1,"params":[{"k":"${params.date"}]}}]}`,
			given: map[string]string{"date": "d"},
			want: []FieldError{{Field: "stages[0].partitions.params[0].k",
				Message: `"${params.date" opens a parameter reference that is never closed: write ${params.NAME}, or $${params for the text itself`}},
		},
		{
			name:  "a value that makes the prefix invalid",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"s3://bkt/${params.date}/"}}}]}`,
			given: map[string]string{"date": "../x"},
			want: []FieldError{{Field: "stages[0].partitions.input.prefix",
				Message: `has a ".." segment ("../x/"); name the folder without "." and ".." segments`}},
		},
		{
			name:  "a bucket from a value, checked resolved",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"s3://${params.region}/x/"}}}]}`,
			given: map[string]string{"date": "d", "region": "EU"},
			want: []FieldError{{Field: "stages[0].partitions.input.prefix",
				Message: `bucket "EU" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`}},
		},
		{
			name:  "an escape that leaves an invalid bucket",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"input":{"prefix":"s3://$${params.x}/y/"}}}]}`,
			given: map[string]string{"date": "d"},
			want: []FieldError{{Field: "stages[0].partitions.input.prefix",
				Message: `bucket "${params.x}" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`}},
		},
		{
			name:  "value too long",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`,
			given: map[string]string{"date": strings.Repeat("x", MaxRunParamValueBytes+1)},
			want:  []FieldError{{Field: "param", Message: "date: the value is 1025 bytes; at most 1024 are allowed"}},
		},
		{
			name:  "NUL in a value",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`,
			given: map[string]string{"date": "a\x00b"},
			want:  []FieldError{{Field: "param", Message: "date: the value must not contain NUL"}},
		},
		{
			name:  "a partition's params over their limit once resolved",
			spec:  head + `"stages":[{"name":"s","task":"t","partitions":{"count":1,"params":[{"k":"${params.date}"}]}}]}`,
			given: map[string]string{"date": strings.Repeat("x", 600)},
			want:  []FieldError{{Field: "stages[0].partitions.params[0]", Message: "encodes to 608 bytes of JSON; at most 512 are allowed"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Parse([]byte(tt.spec))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			_, err = j.Resolve(tt.given)
			if diff := cmp.Diff(tt.want, resolveErrors(t, err)); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The declaration is checked at Parse.
func TestParseParamsDeclaration(t *testing.T) {
	t.Parallel()
	many := make([]string, MaxRunParams+1)
	for i := range many {
		many[i] = `"p` + strings.Repeat("a", i) + `":"v"`
	}
	tests := []struct {
		name, params string
		want         []FieldError
	}{
		{name: "bad name", params: `{"1st":"v"}`,
			want: []FieldError{{Field: "params.1st", Message: `"1st" is not a parameter name: start with a letter or '_', then letters, digits and '_'`}}},
		{name: "dash", params: `{"a-b":"v"}`,
			want: []FieldError{{Field: "params.a-b", Message: `"a-b" is not a parameter name: start with a letter or '_', then letters, digits and '_'`}}},
		{name: "long default", params: `{"a":"` + strings.Repeat("x", MaxRunParamValueBytes+1) + `"}`,
			want: []FieldError{{Field: "params.a", Message: "default is 1025 bytes; at most 1024 are allowed"}}},
		{name: "object default", params: `{"a":{"b":"c"}}`,
			want: []FieldError{{Field: "params.a", Message: "must be a string (the default) or null (no default: every submission sets it)"}}},
		{name: "too many", params: "{" + strings.Join(many, ",") + "}",
			want: []FieldError{{Field: "params", Message: "declares 33 parameters; at most 32 are allowed"}}},
		{name: "not a mapping", params: `["a"]`,
			want: []FieldError{{Field: "params", Message: "must be an object"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(`{"name":"n","params":` + tt.params + `,"stages":[{"name":"s","task":"t","partitions":{"count":1}}]}`))
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Parse: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
