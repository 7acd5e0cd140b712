package devrun

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"

	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/shared/spec"
)

// ExecDir is the programs directory dev's executor runs exec stages
// from: --exec-dir (flagValue), else the caller's BATCHWORK_EXEC_DIR (which dev does
// not pass on as it is: it passes no BATCHWORK_* variable of the caller's),
// made absolute. "" when neither is set: exec stages are refused. It is
// checked before anything is built or started.
func ExecDir(flagValue string, getenv func(string) string) (string, error) {
	dir, from := flagValue, "--exec-dir"
	if dir == "" {
		dir, from = getenv(execstage.EnvExecDir), execstage.EnvExecDir
	}
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s %q: %w", from, dir, err)
	}
	fi, err := os.Stat(abs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s %q: the programs directory: %w", from, dir, err)
	case !fi.IsDir():
		return "", fmt.Errorf("%s %q: the programs directory is not a directory", from, dir)
	}
	return abs, nil
}

// UsesExec reports a spec with an exec stage.
func UsesExec(sp *spec.Job) bool {
	for _, st := range sp.Stages {
		if len(st.Exec) > 0 {
			return true
		}
	}
	return false
}

// execField is the field of a spec error about an exec stage's program.
var execField = regexp.MustCompile(`^stages\[\d+\]\.exec`)

// ExecHint is what dev adds to a refused spec whose exec stage names a
// program the executor does not have, when no programs directory was
// given: the control plane's own message speaks of deployed executors.
func ExecHint(errs []spec.FieldError, execDir string) string {
	if execDir != "" {
		return ""
	}
	for _, fe := range errs {
		if execField.MatchString(fe.Field) {
			return "batchwork dev: exec stages run programs from a directory: give it with --exec-dir DIR (or set " + execstage.EnvExecDir + ")"
		}
	}
	return ""
}
