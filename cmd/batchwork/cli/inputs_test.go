package cli

import (
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// An upload's NAME is a path relative to the inputs area that a spec's
// inputs:<path> can name.
func TestCheckUploadName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, want string // want: part of the error; "" for valid
	}{
		{name: "corpus/"},
		{name: "logs/2026-11-21/part-1.txt"},
		{name: "a.txt"},
		{name: strings.Repeat("k", spec.MaxInputsPath)},
		{name: strings.Repeat("k", spec.MaxInputsPath+1), want: "at most"},
		{name: "", want: "is empty"},
		{name: "/", want: "is empty"},
		{name: "/corpus/", want: "drop the leading '/'"},
		{name: "a//b", want: "empty, '.' or '..' segment"},
		{name: "a/../b", want: "empty, '.' or '..' segment"},
		{name: "./a", want: "empty, '.' or '..' segment"},
		{name: "\xff", want: "valid UTF-8"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			err := checkUploadName(c.name)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("checkUploadName(%q): %v, want none", c.name, err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("checkUploadName(%q): %v, want an error containing %q", c.name, err, c.want)
			}
		})
	}
}
