package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const wordCountYAML = `# Count words in every object under s3://bucket/in/.
name: wordcount
lease: 5m
retry: {maxAttempts: 5, backoff: 10s}
stages:
  - name: map
    task: wordcount-map
    partitions:
      input: {prefix: s3://bucket/in/, splitSize: 1MiB}
    shuffle: {partitions: 4}
  - name: reduce
    task: wordcount-reduce
    after: [map]
    priority: high
`

const wordCountJSON = `{
  "name": "wordcount",
  "lease": "5m",
  "retry": {"maxAttempts": 5, "backoff": "10s"},
  "stages": [
    {
      "name": "map",
      "task": "wordcount-map",
      "partitions": {"input": {"prefix": "s3://bucket/in/", "splitSize": 1048576}},
      "shuffle": {"partitions": 4}
    },
    {"name": "reduce", "task": "wordcount-reduce", "after": ["map"], "priority": "high"}
  ]
}`

func wordCountJob() *Job {
	return &Job{
		Name:  "wordcount",
		Lease: Duration(5 * time.Minute),
		Retry: &Retry{MaxAttempts: 5, Backoff: Duration(10 * time.Second)},
		Stages: []Stage{
			{
				Name:       "map",
				Task:       "wordcount-map",
				Partitions: &Partitions{Input: &Input{Prefix: "s3://bucket/in/", SplitSize: 1 << 20}},
				Shuffle:    &Shuffle{Partitions: 4},
			},
			{Name: "reduce", Task: "wordcount-reduce", After: []string{"map"}, Priority: PriorityHigh},
		},
	}
}

const diamondYAML = `name: diamond
priority: low
stages:
  - name: a
    task: split
    partitions:
      count: 2
      params:
        - {shard: "0"}
        - {shard: "1"}
  - {name: b, task: left, after: [a], partitions: {count: 3}, lease: 2m}
  - {name: c, task: right, after: [a], partitions: {count: 3}, retry: {maxAttempts: 1}}
  - name: d
    task: join
    after: [b, c]
    partitions: {count: 1}
`

func diamondJob() *Job {
	return &Job{
		Name:     "diamond",
		Priority: PriorityLow,
		Stages: []Stage{
			{Name: "a", Task: "split", Partitions: &Partitions{Count: 2, Params: []map[string]string{{"shard": "0"}, {"shard": "1"}}}},
			{Name: "b", Task: "left", After: []string{"a"}, Partitions: &Partitions{Count: 3}, Lease: Duration(2 * time.Minute)},
			{Name: "c", Task: "right", After: []string{"a"}, Partitions: &Partitions{Count: 3}, Retry: &Retry{MaxAttempts: 1}},
			{Name: "d", Task: "join", After: []string{"b", "c"}, Partitions: &Partitions{Count: 1}},
		},
	}
}

func TestParseValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want *Job
	}{
		{"word count YAML", wordCountYAML, wordCountJob()},
		{"word count JSON", wordCountJSON, wordCountJob()},
		{"word count JSON with size string", strings.Replace(wordCountJSON, "1048576", `"1 MiB"`, 1), wordCountJob()},
		{"diamond YAML", diamondYAML, diamondJob()},
		{
			// The same diamond, written with YAML anchors, aliases and
			// merge keys.
			name: "diamond YAML with anchors",
			in: `name: diamond
priority: low
stages:
  - name: a
    task: split
    partitions:
      count: 2
      params: [&p0 {shard: "0"}, {<<: *p0, shard: "1"}]
  - &side {name: b, task: left, after: &fromA [a], partitions: &three {count: 3}, lease: 2m}
  - {<<: *side, name: c, task: right, lease: null, retry: {maxAttempts: 1}}
  - name: d
    task: join
    after: [b, c]
    partitions: {count: 1}
`,
			want: diamondJob(),
		},
		{
			// JSON escapes that YAML does not share.
			name: "JSON escapes",
			in: `{"name": "j", "stages": [{"name": "s", "task": "t",
				"partitions": {"count": 1, "params": [{"path": "a\/b", "emoji": "\ud83d\ude00"}]}}]}`,
			want: &Job{Name: "j", Stages: []Stage{{Name: "s", Task: "t", Partitions: &Partitions{
				Count: 1, Params: []map[string]string{{"path": "a/b", "emoji": "😀"}},
			}}}},
		},
		{
			name: "deadline and concurrency limit",
			in:   "name: j\ndeadline: 30m\nmaxConcurrency: 2\nstages:\n  - {name: s, task: t, partitions: {count: 1}}\n",
			want: &Job{Name: "j", Deadline: Duration(30 * time.Minute), MaxConcurrency: 2, Stages: []Stage{{Name: "s", Task: "t", Partitions: &Partitions{Count: 1}}}},
		},
		{
			name: "nulls and empty lists mean unset",
			in: `name: j
retry: null
lease:
stages:
  - {name: s, task: t, after: [], partitions: {count: 1, params: ~}, shuffle: null}
`,
			want: &Job{Name: "j", Stages: []Stage{{Name: "s", Task: "t", Partitions: &Partitions{Count: 1}}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := Parse([]byte(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// fieldErrors extracts the FieldErrors of a *ValidationError, failing the
// test for any other error.
func fieldErrors(t *testing.T, err error) []FieldError {
	t.Helper()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	return ve.Errors
}

func TestParseRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want []FieldError
	}{
		{
			name: "unknown top-level field",
			in:   "name: j\nstages: []\ncolour: red\n",
			want: []FieldError{{Field: "colour", Message: "unknown field", Line: 3}},
		},
		{
			name: "bad deadline and concurrency limit",
			in:   "name: j\ndeadline: soon\nmaxConcurrency: 0.5\nstages:\n  - {name: s, task: t, partitions: {count: 1}}\n",
			want: []FieldError{{Field: "deadline", Message: `must be a duration such as "30s" or "5m"`, Line: 2}, {Field: "maxConcurrency", Message: "must be an integer", Line: 3}},
		},
		{
			name: "unknown nested field",
			in:   "name: j\nstages:\n  - name: s\n    task: t\n    partitions: {cnt: 3}\n",
			want: []FieldError{{Field: "stages[0].partitions.cnt", Message: "unknown field", Line: 5}},
		},
		{
			name: "unknown field in JSON has no line",
			in:   `{"name": "j", "stages": [{"name": "s", "task": "t", "retry": {"max": 3}}]}`,
			want: []FieldError{{Field: "stages[0].retry.max", Message: "unknown field"}},
		},
		{
			name: "every decode error is reported",
			in: `name: [j]
stages:
  - name: s
    task: t
    partitions: {count: "4", input: {splitSize: 1.5MiB}}
    lease: 30
    shuffle: {partitions: 4.5}
  - name: s2
    task: t
    after: a
    retry: {maxAttempts: 18446744073709551615}
`,
			want: []FieldError{
				{Field: "name", Message: "must be a string", Line: 1},
				{Field: "stages[0].partitions.count", Message: "must be an integer", Line: 5},
				{Field: "stages[0].partitions.input.splitSize", Message: errSize.Error(), Line: 5},
				{Field: "stages[0].lease", Message: errDuration.Error(), Line: 6},
				{Field: "stages[0].shuffle.partitions", Message: "must be an integer", Line: 7},
				{Field: "stages[1].after", Message: "must be a list", Line: 10},
				{Field: "stages[1].retry.maxAttempts", Message: "integer is out of range", Line: 11},
			},
		},
		{
			name: "wrong container kinds",
			in:   `{"name": "j", "stages": {"name": "s"}, "retry": [1]}`,
			want: []FieldError{
				{Field: "stages", Message: "must be a list"},
				{Field: "retry", Message: "must be an object"},
			},
		},
		{
			name: "params values must be strings",
			in:   "name: j\nstages:\n  - name: s\n    task: t\n    partitions:\n      count: 1\n      params: [{shard: 3}]\n",
			want: []FieldError{{Field: "stages[0].partitions.params[0].shard", Message: "must be a string", Line: 7}},
		},
		{
			name: "duplicate key",
			in:   "name: j\nname: k\nstages: []\n",
			want: []FieldError{{Field: "name", Message: "duplicate key", Line: 2}},
		},
		{
			name: "duplicate key in JSON",
			in:   `{"name": "j", "stages": [], "name": "k"}`,
			want: []FieldError{{Field: "name", Message: "duplicate key"}},
		},
		{
			name: "YAML syntax error",
			in:   "name: j\nstages:\n  - name: s\n   task: t\n",
			want: []FieldError{{Message: "syntax error: did not find expected '-' indicator", Line: 2}},
		},
		{
			name: "malformed JSON is reported as YAML",
			in:   "{\n  \"name\": \"j\",\n  \"stages\": [\n}\n",
			want: []FieldError{{Message: "syntax error: did not find expected node content", Line: 3}},
		},
		{
			name: "oversized spec",
			in:   "name: j\n#" + strings.Repeat("x", MaxSpecBytes) + "\n",
			want: []FieldError{{Message: "spec is 262154 bytes; at most 262144 are allowed"}},
		},
		{name: "empty", in: " \n# nothing\n", want: []FieldError{{Message: "spec is empty"}}},
		{name: "null", in: "null", want: []FieldError{{Message: "spec is empty"}}},
		{
			name: "not a mapping",
			in:   "- name: j\n",
			want: []FieldError{{Message: "a spec must be an object (a mapping of fields)", Line: 1}},
		},
		{
			name: "two documents",
			in:   "name: j\n---\nname: k\n",
			want: []FieldError{{Message: "spec must be a single YAML document", Line: 2}},
		},
		{
			name: "invalid UTF-8",
			in:   "name: j\nstages:\n  - name: \xff\n",
			want: []FieldError{{Message: "spec is not valid UTF-8", Line: 3}},
		},
		{
			name: "bad merge key",
			in:   "name: j\nstages:\n  - {<<: [x], name: s}\n",
			want: []FieldError{{Field: "stages[0]", Message: "a merge key (<<) must refer to a mapping or a list of mappings", Line: 3}},
		},
		{
			name: "self-referencing merge",
			in:   "name: j\nstages:\n  - &s {<<: *s}\n",
			want: []FieldError{{Field: "stages[0]", Message: "merge keys are nested too deeply", Line: 3}},
		},
		{
			// A few hundred bytes whose merge keys expand to 10^8 values.
			name: "merge key bomb",
			in: `name: j
stages:
  - name: s
    task: t
    partitions:
      count: 1
      params:
        - &m0 {k0: v, k1: v, k2: v, k3: v, k4: v, k5: v, k6: v, k7: v, k8: v, k9: v}
        - &m1 {<<: [*m0, *m0, *m0, *m0, *m0, *m0, *m0, *m0, *m0, *m0]}
        - &m2 {<<: [*m1, *m1, *m1, *m1, *m1, *m1, *m1, *m1, *m1, *m1]}
        - &m3 {<<: [*m2, *m2, *m2, *m2, *m2, *m2, *m2, *m2, *m2, *m2]}
        - &m4 {<<: [*m3, *m3, *m3, *m3, *m3, *m3, *m3, *m3, *m3, *m3]}
        - &m5 {<<: [*m4, *m4, *m4, *m4, *m4, *m4, *m4, *m4, *m4, *m4]}
        - &m6 {<<: [*m5, *m5, *m5, *m5, *m5, *m5, *m5, *m5, *m5, *m5]}
        - &m7 {<<: [*m6, *m6, *m6, *m6, *m6, *m6, *m6, *m6, *m6, *m6]}
`,
			want: nil, // checked below: the budget error, not a hang
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Parse([]byte(tt.in))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", j)
			}
			got := fieldErrors(t, err)
			if tt.want == nil {
				last := got[len(got)-1]
				if !strings.HasPrefix(last.Message, "spec is too complex") {
					t.Errorf("last error = %v, want the node budget error", last)
				}
				return
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestParseLines checks that validation errors found after decoding point
// at the offending line, and the documented Error format.
func TestParseLines(t *testing.T) {
	t.Parallel()
	in := `name: j
stages:
  - name: a
    task: t
    partitions: {count: 1}
  - name: b
    task: t
    partitions:
      count: 0
      params: []
    after:
      - a
      - x
`
	_, err := Parse([]byte(in))
	want := []FieldError{
		{Field: "stages[1].after[1]", Message: `unknown stage "x"`, Line: 13},
		{Field: "stages[1].partitions", Message: "count, input or inputs is required", Line: 8},
	}
	if diff := cmp.Diff(want, fieldErrors(t, err)); diff != "" {
		t.Errorf("errors mismatch (-want +got):\n%s", diff)
	}
	const wantMsg = `stages[1].after[1]: unknown stage "x" (line 13); stages[1].partitions: count, input or inputs is required (line 8)`
	if err.Error() != wantMsg {
		t.Errorf("Error() = %q, want %q", err.Error(), wantMsg)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "stages[1].after[1]" {
		t.Errorf("errors.As(*FieldError) = %v, want the first field error", fe)
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Size
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "1048576", want: 1 << 20},
		{in: "10B", want: 10},
		{in: "2KB", want: 2000},
		{in: "2KiB", want: 2048},
		{in: "64MiB", want: 64 << 20},
		{in: " 64 MiB ", want: 64 << 20},
		{in: "3MB", want: 3_000_000},
		{in: "1GB", want: 1_000_000_000},
		{in: "4GiB", want: 4 << 30},
		{in: "", wantErr: true},
		{in: "MiB", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "1.5MiB", wantErr: true},
		{in: "1mib", wantErr: true},
		{in: "1TB", wantErr: true},
		{in: "9223372036854775807", want: 1<<63 - 1},
		{in: "9223372036854775808", wantErr: true},
		{in: "8589934592GiB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseSize(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("ParseSize(%q) = %d, %v; want %d, error %t", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestUnitsJSON(t *testing.T) {
	t.Parallel()
	type pair struct {
		D Duration `json:"d"`
		S Size     `json:"s"`
	}
	tests := []struct {
		name     string
		in       string
		want     pair
		wantErr  bool
		wantJSON string
	}{
		{name: "strings", in: `{"d": "1m30s", "s": "2KiB"}`, want: pair{Duration(90 * time.Second), 2048}, wantJSON: `{"d":"1m30s","s":2048}`},
		{name: "integer size", in: `{"d": "30s", "s": 12}`, want: pair{Duration(30 * time.Second), 12}, wantJSON: `{"d":"30s","s":12}`},
		{name: "nulls", in: `{"d": null, "s": null}`, want: pair{}, wantJSON: `{"d":"0s","s":0}`},
		{name: "numeric duration", in: `{"d": 30}`, wantErr: true},
		{name: "bad duration", in: `{"d": "30"}`, wantErr: true},
		{name: "bad size", in: `{"s": "30 parsecs"}`, wantErr: true},
		{name: "fractional size", in: `{"s": 1.5}`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got pair
			err := json.Unmarshal([]byte(tt.in), &got)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Unmarshal(%s) = %+v, want error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
			b, err := json.Marshal(got)
			if err != nil || string(b) != tt.wantJSON {
				t.Errorf("Marshal = %s, %v; want %s", b, err, tt.wantJSON)
			}
		})
	}
}

func TestParseErrorCap(t *testing.T) {
	t.Parallel()
	in := `{"name": "j", "stages": [1` + strings.Repeat(", 1", 149) + `]}`
	_, err := Parse([]byte(in))
	got := fieldErrors(t, err)
	if len(got) != maxErrors+1 {
		t.Fatalf("got %d errors, want %d", len(got), maxErrors+1)
	}
	if want := (FieldError{Field: "stages[99]", Message: "must be an object"}); got[99] != want {
		t.Errorf("error 99 = %v, want %v", got[99], want)
	}
	if want := (FieldError{Message: "and 50 more errors"}); got[100] != want {
		t.Errorf("last error = %v, want %v", got[100], want)
	}
}
