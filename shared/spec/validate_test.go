package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestValidateAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		job  *Job
	}{
		{"word count", wordCountJob()},
		{"diamond", diamondJob()},
		{"single stage", &Job{Name: "j", Stages: []Stage{{Name: "s", Task: "t", Partitions: &Partitions{Count: 1}}}}},
		{"limits", func() *Job {
			j := diamondJob()
			j.Name = strings.Repeat("n", MaxNameLen)
			j.Lease = MaxLease
			j.Retry = &Retry{MaxAttempts: MaxAttemptsLimit, Backoff: MaxBackoff}
			j.Stages[1].Lease = MinLease
			j.Stages[1].Partitions.Count = MaxPartitions
			j.Stages[2].Retry = &Retry{MaxAttempts: 1}
			j.Stages[2].Priority = PriorityNormal
			j.Deadline = MaxDeadline
			j.MaxConcurrency = MaxConcurrencyLimit
			return j
		}()},
		{"shuffle read by two stages", func() *Job {
			j := wordCountJob()
			j.Stages = append(j.Stages, Stage{Name: "reduce2", Task: "t", After: []string{"map"}})
			j.Stages[0].Shuffle.Partitions = MaxShufflePartitions
			return j
		}()},
		{"input with default split size and empty prefix", func() *Job {
			j := wordCountJob()
			j.Stages[0].Partitions.Input = &Input{Prefix: "s3://my-bucket.example"}
			return j
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if err := tt.job.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestValidateRejects(t *testing.T) {
	t.Parallel()
	// Each case breaks a valid job (diamond unless it says word count) and
	// lists exactly the errors expected.
	type mutation func(j *Job)
	wc := func(f mutation) func() *Job {
		return func() *Job { j := wordCountJob(); f(j); return j }
	}
	dia := func(f mutation) func() *Job {
		return func() *Job { j := diamondJob(); f(j); return j }
	}
	many := func(n int) []Stage {
		s := make([]Stage, n)
		for i := range s {
			s[i] = Stage{Name: fmt.Sprint("s", i), Task: "t", Partitions: &Partitions{Count: 1}}
		}
		return s
	}
	badName := func(v string) string {
		return fmt.Sprintf("%q must start with a letter or digit and contain only letters, digits, '_' and '-'", v)
	}
	tests := []struct {
		name string
		job  func() *Job
		want []FieldError
	}{
		// Names.
		{"job name required", dia(func(j *Job) { j.Name = "" }), []FieldError{{Field: "name", Message: "is required"}}},
		{"job name with space", dia(func(j *Job) { j.Name = "word count" }), []FieldError{{Field: "name", Message: badName("word count")}}},
		{"job name leading dash", dia(func(j *Job) { j.Name = "-x" }), []FieldError{{Field: "name", Message: badName("-x")}}},
		{"job name too long", dia(func(j *Job) { j.Name = strings.Repeat("a", MaxNameLen+1) }), []FieldError{{Field: "name", Message: "must be at most 64 characters"}}},
		{"stage name required", dia(func(j *Job) { j.Stages[3].Name = "" }), []FieldError{{Field: "stages[3].name", Message: "is required"}}},
		{"stage name with dot", dia(func(j *Job) { j.Stages[3].Name = "d.e" }), []FieldError{{Field: "stages[3].name", Message: badName("d.e")}}},
		{"duplicate stage name", dia(func(j *Job) { j.Stages[2].Name = "b" }), []FieldError{
			{Field: "stages[2].name", Message: `duplicate stage name "b" (also stages[1])`},
			{Field: "stages[3].after[1]", Message: `unknown stage "c"`},
		}},
		{"task required", dia(func(j *Job) { j.Stages[0].Task = "" }), []FieldError{{Field: "stages[0].task", Message: "is required"}}},
		{"task with slash", dia(func(j *Job) { j.Stages[0].Task = "a/b" }), []FieldError{{Field: "stages[0].task", Message: `"a/b" must start with a letter or digit and contain only letters, digits, '.', '_' and '-'`}}},

		// Stage count.
		{"no stages", dia(func(j *Job) { j.Stages = nil }), []FieldError{{Field: "stages", Message: "at least one stage is required"}}},
		{"too many stages", dia(func(j *Job) { j.Stages = many(MaxStages + 1) }), []FieldError{{Field: "stages", Message: "has 65 stages; at most 64 are allowed"}}},

		// After and the graph.
		{"after unknown stage", dia(func(j *Job) { j.Stages[3].After = []string{"b", "x"} }), []FieldError{{Field: "stages[3].after[1]", Message: `unknown stage "x"`}}},
		{"after itself", dia(func(j *Job) { j.Stages[3].After = []string{"b", "d"} }), []FieldError{{Field: "stages[3].after[1]", Message: "a stage cannot run after itself"}}},
		{"after twice", dia(func(j *Job) { j.Stages[3].After = []string{"b", "c", "b"} }), []FieldError{{Field: "stages[3].after[2]", Message: `duplicate entry "b"`}}},
		{"two-stage cycle", dia(func(j *Job) { j.Stages[0].After = []string{"b"} }), []FieldError{
			{Field: "stages[0].after", Message: "cycle b -> a -> b"},
		}},
		{"cycles through the diamond", dia(func(j *Job) { j.Stages[0].After = []string{"d"} }), []FieldError{
			{Field: "stages[0].after", Message: "cycle d -> a -> b -> d"},
			{Field: "stages[0].after", Message: "cycle d -> a -> c -> d"},
		}},
		{"cycle reported on the forward reference", func() *Job {
			// s0 after s1, s1 after s2, s2 after s0: s0 and s1 both
			// name a stage declared after them; the earlier is reported.
			j := &Job{Name: "j", Stages: many(3)}
			j.Stages[0].After = []string{"s1"}
			j.Stages[1].After = []string{"s2"}
			j.Stages[2].After = []string{"s0"}
			return j
		}, []FieldError{{Field: "stages[0].after", Message: "cycle s1 -> s0 -> s2 -> s1"}}},

		// Priority, lease, retry.
		{"job priority", dia(func(j *Job) { j.Priority = "urgent" }), []FieldError{{Field: "priority", Message: `"urgent" is not a priority; use "high", "normal" or "low"`}}},
		{"stage priority", dia(func(j *Job) { j.Stages[2].Priority = "HIGH" }), []FieldError{{Field: "stages[2].priority", Message: `"HIGH" is not a priority; use "high", "normal" or "low"`}}},
		// Deadline and concurrency limit.
		{"deadline too short", dia(func(j *Job) { j.Deadline = Duration(500 * time.Millisecond) }), []FieldError{{Field: "deadline", Message: "must be between 1s and 168h0m0s"}}},
		{"deadline negative", dia(func(j *Job) { j.Deadline = -Duration(time.Minute) }), []FieldError{{Field: "deadline", Message: "must be between 1s and 168h0m0s"}}},
		{"deadline too long", dia(func(j *Job) { j.Deadline = MaxDeadline + 1 }), []FieldError{{Field: "deadline", Message: "must be between 1s and 168h0m0s"}}},
		{"maxConcurrency negative", dia(func(j *Job) { j.MaxConcurrency = -1 }), []FieldError{{Field: "maxConcurrency", Message: "must be between 1 and 1000, or 0 for no limit"}}},
		{"maxConcurrency too large", dia(func(j *Job) { j.MaxConcurrency = MaxConcurrencyLimit + 1 }), []FieldError{{Field: "maxConcurrency", Message: "must be between 1 and 1000, or 0 for no limit"}}},
		{"job lease too short", dia(func(j *Job) { j.Lease = Duration(500 * time.Millisecond) }), []FieldError{{Field: "lease", Message: "must be between 1s and 12h0m0s"}}},
		{"job lease negative", dia(func(j *Job) { j.Lease = -DefaultLease }), []FieldError{{Field: "lease", Message: "must be between 1s and 12h0m0s"}}},
		{"stage lease too long", dia(func(j *Job) { j.Stages[1].Lease = MaxLease + 1 }), []FieldError{{Field: "stages[1].lease", Message: "must be between 1s and 12h0m0s"}}},
		{"stage maxAttempts too high", dia(func(j *Job) { j.Stages[2].Retry.MaxAttempts = MaxAttemptsLimit + 1 }), []FieldError{{Field: "stages[2].retry.maxAttempts", Message: "must be between 1 and 100"}}},
		{"stage maxAttempts negative", dia(func(j *Job) { j.Stages[2].Retry.MaxAttempts = -1 }), []FieldError{{Field: "stages[2].retry.maxAttempts", Message: "must be between 1 and 100"}}},
		{"job backoff negative", dia(func(j *Job) { j.Retry = &Retry{Backoff: -1} }), []FieldError{{Field: "retry.backoff", Message: "must not be negative"}}},
		{"stage backoff too long", dia(func(j *Job) { j.Stages[3].Retry = &Retry{Backoff: MaxBackoff + 1} }), []FieldError{{Field: "stages[3].retry.backoff", Message: "must be at most 24h0m0s"}}},

		// Shuffle.
		{"shuffle partitions zero", wc(func(j *Job) { j.Stages[0].Shuffle.Partitions = 0 }), []FieldError{{Field: "stages[0].shuffle.partitions", Message: "must be between 1 and 10000"}}},
		{"shuffle partitions too many", wc(func(j *Job) { j.Stages[0].Shuffle.Partitions = MaxShufflePartitions + 1 }), []FieldError{{Field: "stages[0].shuffle.partitions", Message: "must be between 1 and 10000"}}},
		{"shuffle not read", wc(func(j *Job) { j.Stages = j.Stages[:1] }), []FieldError{{Field: "stages[0].shuffle", Message: "no stage reads this shuffle"}}},
		{"partitions given with a shuffle upstream", wc(func(j *Job) { j.Stages[1].Partitions = &Partitions{Count: 4} }), []FieldError{
			{Field: "stages[1].partitions", Message: `a stage fed by a shuffle takes its partitions from shuffle of stage "map"`},
		}},
		{"no partitions and no shuffle upstream", dia(func(j *Job) { j.Stages[3].Partitions = nil }), []FieldError{
			{Field: "stages[3].partitions", Message: "required (count, input or inputs) unless the stage reads a shuffle: a stage in its after: with shuffle: {partitions: N}"},
		}},
		{"two shuffle upstreams of different partitions", dia(func(j *Job) {
			j.Stages[1].Shuffle = &Shuffle{Partitions: 2}
			j.Stages[2].Shuffle = &Shuffle{Partitions: 3}
			j.Stages[3].Partitions = nil
		}), []FieldError{{Field: "stages[3].after", Message: `reads the shuffles of stages "b" (2 partitions) and "c" (3 partitions); a stage reading several shuffles needs them all to have the same shuffle.partitions`}}},

		// Partitions.
		{"partitions empty", dia(func(j *Job) { j.Stages[1].Partitions = &Partitions{} }), []FieldError{{Field: "stages[1].partitions", Message: "count, input or inputs is required"}}},
		{"count too high", dia(func(j *Job) { j.Stages[1].Partitions.Count = MaxPartitions + 1 }), []FieldError{{Field: "stages[1].partitions.count", Message: "must be between 1 and 100000"}}},
		{"count negative", dia(func(j *Job) { j.Stages[1].Partitions.Count = -3 }), []FieldError{{Field: "stages[1].partitions.count", Message: "must be between 1 and 100000"}}},
		{"count and input", dia(func(j *Job) { j.Stages[0].Partitions.Input = &Input{Prefix: "s3://bucket/x"} }), []FieldError{
			{Field: "stages[0].partitions", Message: "count, input and inputs are mutually exclusive: give exactly one"},
		}},
		{"params shorter than count", dia(func(j *Job) { j.Stages[0].Partitions.Params = j.Stages[0].Partitions.Params[:1] }), []FieldError{
			{Field: "stages[0].partitions.params", Message: "must have one entry per partition: has 1, count is 2"},
		}},
		{"params with input", wc(func(j *Job) { j.Stages[0].Partitions.Params = []map[string]string{{}} }), []FieldError{
			{Field: "stages[0].partitions.params", Message: "requires count: there is one params entry per partition"},
		}},
		{"params entry too large", dia(func(j *Job) { j.Stages[0].Partitions.Params[1]["shard"] = strings.Repeat("x", 600) }), []FieldError{
			{Field: "stages[0].partitions.params[1]", Message: "encodes to 612 bytes of JSON; at most 512 are allowed"},
		}},
		{"params not UTF-8", dia(func(j *Job) { j.Stages[0].Partitions.Params[0]["shard"] = "\xff" }), []FieldError{
			{Field: "stages[0].partitions.params[0]", Message: "keys and values must be valid UTF-8"},
		}},
		{"prefix not s3", wc(func(j *Job) { j.Stages[0].Partitions.Input.Prefix = "https://bucket/in/" }), []FieldError{
			{Field: "stages[0].partitions.input.prefix", Message: `"https://bucket/in/" must have the form s3://bucket/prefix, or inputs:<path> for a path in your inputs area`},
		}},
		{"prefix bucket too short", wc(func(j *Job) { j.Stages[0].Partitions.Input.Prefix = "s3://b/in/" }), []FieldError{
			{Field: "stages[0].partitions.input.prefix", Message: `bucket "b" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`},
		}},
		{"prefix bucket upper case", wc(func(j *Job) { j.Stages[0].Partitions.Input.Prefix = "s3://MyBucket/in/" }), []FieldError{
			{Field: "stages[0].partitions.input.prefix", Message: `bucket "MyBucket" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`},
		}},
		{"split size negative", wc(func(j *Job) { j.Stages[0].Partitions.Input.SplitSize = -1 }), []FieldError{
			{Field: "stages[0].partitions.input.splitSize", Message: "must be at least 4096 (bytes)"},
		}},

		// The stored form.
		{"encoded spec too large", dia(func(j *Job) {
			p := j.Stages[0].Partitions
			p.Count = 1000
			p.Params = make([]map[string]string, p.Count)
			for i := range p.Params {
				p.Params[i] = map[string]string{"v": strings.Repeat("x", 300)}
			}
		}), []FieldError{{Message: "spec encodes to 309357 bytes of JSON; at most 262144 are allowed"}}},

		// All errors, in order.
		{"several errors", dia(func(j *Job) {
			j.Name = ""
			j.Stages[0].Task = ""
			j.Stages[1].Partitions = nil
			j.Stages[3].After = []string{"b", "x"}
		}), []FieldError{
			{Field: "name", Message: "is required"},
			{Field: "stages[0].task", Message: "is required"},
			{Field: "stages[3].after[1]", Message: `unknown stage "x"`},
			{Field: "stages[1].partitions", Message: "required (count, input or inputs) unless the stage reads a shuffle: a stage in its after: with shuffle: {partitions: N}"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.job().Validate()
			if err == nil {
				t.Fatal("Validate succeeded")
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate error %v is a %T, want *ValidationError", err, err)
			}
			if diff := cmp.Diff(tt.want, ve.Errors); diff != "" {
				t.Errorf("errors mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseS3URI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in             string
		bucket, prefix string
		wantErr        bool
	}{
		{in: "s3://bucket/in/", bucket: "bucket", prefix: "in/"},
		{in: "s3://bucket", bucket: "bucket"},
		{in: "s3://bucket/", bucket: "bucket"},
		{in: "s3://my.bucket-1/a/b/c.txt", bucket: "my.bucket-1", prefix: "a/b/c.txt"},
		{in: "s3://" + strings.Repeat("b", 63) + "/x", bucket: strings.Repeat("b", 63), prefix: "x"},
		{in: "s3://bucket/" + strings.Repeat("k", maxKeyBytes), bucket: "bucket", prefix: strings.Repeat("k", maxKeyBytes)},
		{in: "s3://bucket/" + strings.Repeat("k", maxKeyBytes+1), wantErr: true},
		{in: "s3://" + strings.Repeat("b", 64) + "/x", wantErr: true},
		{in: "s3://ab/x", wantErr: true},
		{in: "s3:///x", wantErr: true},
		{in: "s3://bu_cket/x", wantErr: true},
		{in: "S3://bucket/x", wantErr: true},
		{in: "bucket/x", wantErr: true},
		{in: "", wantErr: true},
		{in: "s3://bucket/\xff", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			bucket, prefix, err := ParseS3URI(tt.in)
			if (err != nil) != tt.wantErr || bucket != tt.bucket || prefix != tt.prefix {
				t.Errorf("ParseS3URI(%q) = %q, %q, %v; want %q, %q, error %t", tt.in, bucket, prefix, err, tt.bucket, tt.prefix, tt.wantErr)
			}
		})
	}
}

// An input prefix is an s3:// URI or inputs:<path>, a path in the
// submitter's own inputs area that the control plane resolves at submit.
func TestInputPrefixForms(t *testing.T) {
	t.Parallel()
	const field = "stages[0].partitions.input.prefix"
	tests := []struct {
		prefix string
		want   string // the error's message; "" for valid
	}{
		{prefix: "s3://bucket/in/"},
		{prefix: "inputs:corpus/"},
		{prefix: "inputs:corpus/2026/part-1.txt"},
		{prefix: "inputs:"},
		{prefix: "inputs:" + strings.Repeat("k", MaxInputsPath)},
		{prefix: "inputs:" + strings.Repeat("k", MaxInputsPath+1),
			want: fmt.Sprintf("the path after inputs: is %d bytes; at most %d fit in an S3 key under your inputs area", MaxInputsPath+1, MaxInputsPath)},
		{prefix: "inputs:/corpus/", want: "the path after inputs: is relative to your inputs area: drop the leading '/'"},
		{prefix: "inputs:\xff", want: "the path after inputs: must be valid UTF-8"},
		{prefix: "corpus/", want: `"corpus/" must have the form s3://bucket/prefix, or inputs:<path> for a path in your inputs area`},
		{prefix: "input:corpus/", want: `"input:corpus/" must have the form s3://bucket/prefix, or inputs:<path> for a path in your inputs area`},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			t.Parallel()
			j := wordCountJob()
			j.Stages[0].Partitions.Input.Prefix = tt.prefix
			err := j.Validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want none", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff([]FieldError{{Field: field, Message: tt.want}}, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
