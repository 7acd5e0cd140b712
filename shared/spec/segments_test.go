package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Input prefixes and output folders are S3 keys that tools map to paths:
// a ".", ".." or empty segment is refused, with the field that holds it.
func TestPathSegmentsAreRefused(t *testing.T) {
	t.Parallel()
	const inField = "stages[0].partitions.input.prefix"
	tests := []struct {
		name   string
		input  string // replaces the map stage's input prefix when set
		output string
		field  string // "" for valid
		want   string
	}{
		{name: "input s3 folder", input: "s3://bucket/in/"},
		{name: "input partial name", input: "inputs:logs/2026-"},
		{name: "input dotted name", input: "inputs:corpus/.hidden/a..b/"},
		{name: "output s3 folder", output: "s3://bucket/results/run.1/"},
		{name: "output dotted name", output: "outputs:wc/..x/"},

		{name: "input dotdot", input: "inputs:../other/", field: inField, want: `has a ".." segment ("../other/"); name the folder without "." and ".." segments`},
		{name: "input dot", input: "inputs:corpus/./a/", field: inField, want: `has a "." segment ("corpus/./a/"); name the folder without "." and ".." segments`},
		{name: "input empty", input: "inputs:corpus//a/", field: inField, want: `has an empty segment ("corpus//a/"); write one '/' between names`},
		{name: "input s3 dotdot", input: "s3://bucket/in/../x/", field: inField, want: `has a ".." segment ("in/../x/"); name the folder without "." and ".." segments`},
		{name: "input s3 leading slash", input: "s3://bucket//in/", field: inField, want: `has an empty segment ("/in/"); write one '/' between names`},
		{name: "input last dotdot", input: "inputs:corpus/..", field: inField, want: `has a ".." segment ("corpus/.."); name the folder without "." and ".." segments`},
		{name: "output dotdot", output: "outputs:../x/", field: "output", want: `has a ".." segment ("../x/"); name the folder without "." and ".." segments`},
		{name: "output dot", output: "outputs:wc/./", field: "output", want: `has a "." segment ("wc/./"); name the folder without "." and ".." segments`},
		{name: "output empty", output: "outputs:wc//s/", field: "output", want: `has an empty segment ("wc//s/"); write one '/' between names`},
		{name: "output s3 dotdot", output: "s3://bucket/a/../b/", field: "output", want: `has a ".." segment ("a/../b/"); name the folder without "." and ".." segments`},
		{name: "output s3 double slash", output: "s3://bucket/a//", field: "output", want: `has an empty segment ("a//"); write one '/' between names`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j := wordCountJob()
			if tt.input != "" {
				j.Stages[0].Partitions.Input.Prefix = tt.input
			}
			j.Output = tt.output
			err := j.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Validate: %v, want none", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("Validate: %v, want a *ValidationError", err)
			}
			if diff := cmp.Diff([]FieldError{{Field: tt.field, Message: tt.want}}, ve.Errors); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}
