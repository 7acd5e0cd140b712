package devrun

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// dev finds the programs directory where its help and its errors say:
// --exec-dir, else BATCHWORK_EXEC_DIR; relative paths are made absolute
// (the executor runs elsewhere), and a wrong one is refused before anything
// is built, naming where it came from.
func TestDevExecDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, flag, env string
		want, wantErr   string
	}{
		{name: "neither: no programs"},
		{name: "the flag", flag: dir, want: dir},
		{name: "a relative flag is made absolute", flag: rel, want: dir},
		{name: "the environment", env: dir, want: dir},
		{name: "the flag wins", flag: dir, env: "/nowhere", want: dir},
		{name: "missing", flag: filepath.Join(dir, "nope"), wantErr: "--exec-dir"},
		{name: "missing, from the environment", env: filepath.Join(dir, "nope"), wantErr: "BATCHWORK_EXEC_DIR"},
		{name: "a file", flag: file, wantErr: "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := ExecDir(tc.flag, func(k string) string {
				if k == "BATCHWORK_EXEC_DIR" {
					return tc.env
				}
				return ""
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ExecDir = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// A spec refused for its exec stage's program, in a dev run given no
// programs directory, gets the hint that works in dev.
func TestDevExecHint(t *testing.T) {
	t.Parallel()
	execErr := []spec.FieldError{{Field: "stages[1].exec[0]", Message: "no executor here runs programs"}}
	if h := ExecHint(execErr, ""); !strings.Contains(h, "--exec-dir") {
		t.Errorf("hint %q does not name --exec-dir", h)
	}
	if h := ExecHint(execErr, "/p"); h != "" {
		t.Errorf("hint %q with a programs directory given", h)
	}
	if h := ExecHint([]spec.FieldError{{Field: "stages[0].task", Message: "unknown"}}, ""); h != "" {
		t.Errorf("hint %q for a task error", h)
	}
}
