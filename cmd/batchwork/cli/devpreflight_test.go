package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/emulator"
)

func runDevIn(t *testing.T, dir string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(context.Background(), append([]string{"dev"}, args...), Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: os.Getenv,
		Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	return code, out.String(), errOut.String()
}

// dev checks what it can check in a moment before it builds anything (a
// build takes a minute on a new project): the spec, offline, with the
// hint a stage reading nothing needs; then the emulator's servers.
// -package names no package at all: reaching the build fails differently.
func TestDevChecksFirst(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // no module here, and so no emulator servers beside it
	for _, k := range []string{emulator.EnvEndpointURL, emulator.EnvEmulator, emulator.EnvMotoServer, emulator.EnvDynamoDBLocalDir,
		emulator.EnvEndpointURLDynamoDB, emulator.EnvDynamoDB, "BATCHWORK_EXEC_DIR"} {
		t.Setenv(k, "")
	}
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "cache"))
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	noShuffle := write("noshuffle.yaml", `name: two
stages:
  - name: a
    task: t.a
    partitions: {count: 2}
  - name: b
    task: t.b
    after: [a]
`)
	valid := write("valid.yaml", `name: one
stages:
  - name: a
    task: t.a
    partitions: {count: 2}
`)
	execSpec := write("exec.yaml", `name: up
stages:
  - name: a
    exec: [upper]
    partitions: {count: 1}
`)
	for _, tc := range []struct {
		name, spec string
		code       int
		want       []string
	}{
		{"an invalid spec, with the shuffle hint", noShuffle, ExitInvalid,
			[]string{"stages[1].partitions", "shuffle: {partitions: N}", "is not a valid job spec"}},
		{"an exec stage and no programs directory", execSpec, ExitUsage, []string{"--exec-dir DIR (or set BATCHWORK_EXEC_DIR)"}},
		{"no emulator", valid, ExitError, []string{"moto and DynamoDB Local not found", "or point AWS_ENDPOINT_URL at a running emulator"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runDevIn(t, dir, tc.spec, "-package", "./no-such-package")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if strings.Contains(stdout, "building") || strings.Contains(stderr, "no-such-package") {
				t.Errorf("dev built before checking:\n%s%s", stdout, stderr)
			}
			t.Logf("answered in %v", time.Since(start).Round(time.Millisecond))
		})
	}
}
