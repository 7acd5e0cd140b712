package spec

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStageRunnable(t *testing.T) {
	t.Parallel()
	// stage returns a one-stage spec whose stage has the given fields.
	stage := func(fields string) string {
		return "name: j\nstages:\n  - name: s\n    partitions: {count: 1}\n" + fields
	}
	long := strings.Repeat("a", MaxExecArgBytes+1)
	tests := []struct {
		name string
		in   string
		want []FieldError // nil: valid
		// check, for a valid spec, what was parsed.
		check func(*testing.T, *Job)
	}{
		{name: "exec", in: stage("    exec: [wordcount.py, map, --lower]\n"), check: func(t *testing.T, j *Job) {
			if d := cmp.Diff([]string{"wordcount.py", "map", "--lower"}, j.Stages[0].Exec); d != "" {
				t.Errorf("exec (-want +got):\n%s", d)
			}
		}},
		{name: "exec with a dotted name and empty argument", in: stage("    exec: [my-tool_2.sh, \"\"]\n")},
		{name: "lambda by name", in: stage("    lambda: my-fn\n"), check: func(t *testing.T, j *Job) {
			if j.Stages[0].Lambda != "my-fn" || j.Stages[0].Task != "" {
				t.Errorf("stage = %+v", j.Stages[0])
			}
		}},
		{name: "lambda with alias", in: stage("    lambda: my-fn:live\n")},
		{name: "lambda by ARN", in: stage("    lambda: arn:aws:lambda:eu-west-1:123456789012:function:my-fn:3\n")},
		{name: "none", in: stage(""), want: []FieldError{{Field: "stages[0].task", Message: "is required", Line: 3}}},
		{name: "task and exec", in: stage("    task: t\n    exec: [x]\n"),
			want: []FieldError{{Field: "stages[0]", Message: "give one of task, exec or lambda, not both (has task and exec)", Line: 3}}},
		{name: "all three", in: stage("    task: t\n    exec: [x]\n    lambda: f\n"),
			want: []FieldError{{Field: "stages[0]", Message: "give one of task, exec or lambda, not both (has task and exec and lambda)", Line: 3}}},
		{name: "empty exec", in: stage("    exec: []\n"),
			want: []FieldError{{Field: "stages[0].exec", Message: "want a program and its arguments, e.g. [wordcount.py, map]", Line: 5}}},
		{name: "null exec", in: stage("    exec:\n"),
			want: []FieldError{{Field: "stages[0].exec", Message: "want a program and its arguments, e.g. [wordcount.py, map]", Line: 5}}},
		{name: "exec not a list", in: stage("    exec: wordcount.py map\n"),
			want: []FieldError{{Field: "stages[0].exec", Message: "must be a list", Line: 5}}},
		{name: "exec argument not a string", in: stage("    exec: [x, 3]\n"),
			want: []FieldError{{Field: "stages[0].exec[1]", Message: "must be a string", Line: 5}}},
		{name: "program with a path", in: stage("    exec: [/bin/sh, -c, id]\n"),
			want: []FieldError{{Field: "stages[0].exec[0]", Message: `"/bin/sh" must be a program's bare name (letters, digits, '.', '_', '+' and '-', at most 64 characters): the executor runs only programs from its own programs directory, never a path`, Line: 5}}},
		{name: "program dot-dot", in: stage("    exec: [..]\n"),
			want: []FieldError{{Field: "stages[0].exec[0]", Message: `".." must be a program's bare name (letters, digits, '.', '_', '+' and '-', at most 64 characters): the executor runs only programs from its own programs directory, never a path`, Line: 5}}},
		{name: "empty program", in: stage("    exec: [\"\", x]\n"),
			want: []FieldError{{Field: "stages[0].exec[0]", Message: "want a program name", Line: 5}}},
		{name: "argument too long", in: stage("    exec: [x, " + long + "]\n"),
			want: []FieldError{{Field: "stages[0].exec[1]", Message: "is 1025 bytes; at most 1024 are allowed", Line: 5}}},
		{name: "argument with NUL", in: stage("    exec: [x, \"a\\0b\"]\n"),
			want: []FieldError{{Field: "stages[0].exec[1]", Message: "must not contain a NUL byte", Line: 5}}},
		{name: "too many arguments", in: stage("    exec: [x" + strings.Repeat(", a", MaxExecArgs) + "]\n"),
			want: []FieldError{{Field: "stages[0].exec", Message: "has 65 entries; at most 64 are allowed", Line: 5}}},
		{name: "lambda not a name", in: stage("    lambda: \"my fn\"\n"),
			want: []FieldError{{Field: "stages[0].lambda", Message: `"my fn" must be a Lambda function name (optionally with :version or :alias) or a function ARN`, Line: 5}}},
		{name: "lambda ARN of another service", in: stage("    lambda: arn:aws:iam::123456789012:role/x\n"),
			want: []FieldError{{Field: "stages[0].lambda", Message: `"arn:aws:iam::123456789012:role/x" must be a Lambda function name (optionally with :version or :alias) or a function ARN`, Line: 5}}},
		{name: "lambda and task in JSON", in: `{"name": "j", "stages": [{"name": "s", "task": "t", "lambda": "f", "partitions": {"count": 1}}]}`,
			want: []FieldError{{Field: "stages[0]", Message: "give one of task, exec or lambda, not both (has task and lambda)"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Parse([]byte(tt.in))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if tt.check != nil {
					tt.check(t, j)
				}
				// The stored form parses back to the same stage.
				b, err := j.Encode()
				if err != nil {
					t.Fatal(err)
				}
				back, err := Parse(b)
				if err != nil {
					t.Fatalf("re-parse %s: %v", b, err)
				}
				if d := cmp.Diff(j, back); d != "" {
					t.Errorf("round trip (-want +got):\n%s", d)
				}
				return
			}
			if d := cmp.Diff(tt.want, fieldErrors(t, err)); d != "" {
				t.Errorf("errors (-want +got):\n%s", d)
			}
		})
	}
}
