package spec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A job's output is an s3:// folder or an outputs:<path>/ folder: a bad
// one is an error on "output" that says what is wrong.
func TestOutputForms(t *testing.T) {
	t.Parallel()
	maxPath := MaxOutputFolder - OutputsAreaPrefixBytes
	tests := []struct {
		output string
		want   string // the error's message; "" for valid
	}{
		{output: ""},
		{output: "s3://bucket/results/"},
		{output: "s3://bucket/a/b/c/"},
		{output: "outputs:wc/"},
		{output: "outputs:wc/2026-11-23/"},
		{output: "outputs:" + strings.Repeat("k", maxPath-1) + "/"},
		{output: "outputs:" + strings.Repeat("k", maxPath) + "/",
			want: fmt.Sprintf("the path after outputs: is %d bytes; at most %d leave room for the names published under it", maxPath+1, maxPath)},
		{output: "s3://bucket/" + strings.Repeat("k", MaxOutputFolder) + "/",
			want: fmt.Sprintf("prefix is %d bytes; at most %d leave room for the names published under it", MaxOutputFolder+1, MaxOutputFolder)},
		{output: "outputs:wc", want: "must end with '/': it names a folder (outputs:wc/)"},
		{output: "s3://bucket/results", want: "must end with '/': it names a folder (s3://bucket/results/)"},
		{output: "outputs:", want: "names your whole outputs area; name a folder in it: outputs:<path>/"},
		{output: "outputs:/", want: "names your whole outputs area; name a folder in it: outputs:<path>/"},
		{output: "outputs:/wc/", want: "the path after outputs: is relative to your outputs area: drop the leading '/'"},
		{output: "outputs:\xff/", want: "the path after outputs: must be valid UTF-8"},
		{output: "s3://bucket", want: "names a whole bucket; name a folder in it: s3://bucket/prefix/"},
		{output: "s3://bucket/", want: "names a whole bucket; name a folder in it: s3://bucket/prefix/"},
		{output: "s3://B/x/", want: `bucket "B" must be 3 to 63 characters of a-z, 0-9, '.' and '-'`},
		{output: "results/", want: `"results/" must have the form s3://bucket/prefix/, or outputs:<path>/ for a folder in your outputs area`},
		{output: "inputs:wc/", want: `"inputs:wc/" must have the form s3://bucket/prefix/, or outputs:<path>/ for a folder in your outputs area`},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			t.Parallel()
			j := wordCountJob()
			j.Output = tt.output
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
			if diff := cmp.Diff([]FieldError{{Field: "output", Message: tt.want}}, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// The output field is read from YAML and kept in the stored spec.
func TestOutputParses(t *testing.T) {
	t.Parallel()
	j, err := Parse([]byte("name: wc\noutput: outputs:wc/\nstages:\n  - name: s\n    task: work\n    partitions: {count: 1}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if j.Output != "outputs:wc/" {
		t.Fatalf("output %q, want outputs:wc/", j.Output)
	}
	b, err := j.Encode()
	if err != nil || !strings.Contains(string(b), `"output":"outputs:wc/"`) {
		t.Fatalf("encoded %s (%v), want the output kept", b, err)
	}
	_, err = Parse([]byte("name: wc\noutput: results\nstages:\n  - name: s\n    task: work\n    partitions: {count: 1}\n"))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "output" || ve.Errors[0].Line != 2 {
		t.Fatalf("Parse: %v, want one error on output at line 2", err)
	}
}
