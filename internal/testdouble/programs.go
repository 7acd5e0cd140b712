package testdouble

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Programs writes executable shell scripts (name → body, without the #!
// line) into a fresh programs directory and returns it: the exec stages'
// programs a test runs. A child process writes each one, never this one:
// a script this process held open for writing while a parallel test
// forked would stay open in that child until it execs, and running the
// script in that window fails with ETXTBSY ("text file busy"). The
// child's write fd is closed when it exits, before the script runs.
func Programs(t testing.TB, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		cmd := exec.Command("/bin/sh", "-c", `cat >"$1" && chmod 755 "$1"`, "sh", filepath.Join(dir, name))
		cmd.Stdin = strings.NewReader("#!/bin/sh\n" + body)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("write program %s: %v: %s", name, err, out)
		}
	}
	return dir
}
