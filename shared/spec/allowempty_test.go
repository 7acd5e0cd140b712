package spec

import (
	"errors"
	"strings"
	"testing"
)

// partitions.input.allowEmpty opts a stage in to an input prefix that
// matches no object; it is a boolean of an input, kept in the stored spec
// (and its hash), and absent from a spec that does not set it.
func TestInputAllowEmpty(t *testing.T) {
	t.Parallel()
	const base = `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"input":{"prefix":"inputs:in/"%s}}}]}`
	tests := []struct {
		name  string
		extra string
		want  bool
		field string // the error's field; "" for valid
	}{
		{name: "absent"},
		{name: "true", extra: `,"allowEmpty":true`, want: true},
		{name: "false", extra: `,"allowEmpty":false`},
		{name: "not a boolean", extra: `,"allowEmpty":"yes"`, field: "stages[0].partitions.input.allowEmpty"},
		{name: "misspelt", extra: `,"allowempty":true`, field: "stages[0].partitions.input.allowempty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			j, err := Parse([]byte(strings.Replace(base, "%s", tt.extra, 1)))
			if tt.field != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || len(ve.Errors) == 0 || ve.Errors[0].Field != tt.field {
					t.Fatalf("Parse: %v, want an error on %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := j.Stages[0].Partitions.Input.AllowEmpty; got != tt.want {
				t.Errorf("allowEmpty %v, want %v", got, tt.want)
			}
			enc, err := j.Encode()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(string(enc), `"allowEmpty":true`); got != tt.want {
				t.Errorf("stored spec %s: allowEmpty kept %v, want %v", enc, got, tt.want)
			}
		})
	}
}
