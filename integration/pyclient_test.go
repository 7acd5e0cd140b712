package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/localauth"
)

// repoRoot is the repository: the tests run in integration/.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no repository root above integration/: %v", err)
	}
	return root
}

// venvPython is the repository virtualenv's interpreter (make venv).
func venvPython(t *testing.T, root string) string {
	t.Helper()
	py := filepath.Join(root, ".venv", "bin", "python")
	if _, err := os.Stat(py); err != nil {
		t.Fatalf("no %s: run `make venv`: %v", py, err)
	}
	return py
}

// pythonEnv is the environment a Python process of a test runs in: this
// one without Batchwork's or the local token's settings, which would
// point the client elsewhere, and without writing bytecode into the
// checkout.
func pythonEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BATCHWORK_") && !strings.HasPrefix(kv, "PYTHON") {
			env = append(env, kv)
		}
	}
	return append(append(env, "PYTHONDONTWRITEBYTECODE=1"), extra...)
}

// The Python client's tests, against a local runner with the tasks its
// live tests submit (py.echo writes its partition, py.hang runs until
// cancelled). Its unit tests (a stub server) run in the same command. The
// package comes from the checkout's source tree (PYTHONPATH): installing
// it offline would need the wheel package, which the virtualenv lacks.
func TestPythonClient(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("py.echo", func(ctx context.Context, tk *batchwork.Task) error {
		_, err := fmt.Fprintf(tk.Out, "partition %d\n", tk.Partition)
		return err
	})
	reg.Register("py.hang", func(ctx context.Context, tk *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	root := repoRoot(t)
	py := venvPython(t, root)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", filepath.Join(root, "clients", "python", "tests"))
	cmd.Env = pythonEnv("PYTHONPATH="+filepath.Join(root, "clients", "python", "src"), "BATCHWORK_PYCLIENT_LIVE=1",
		"BATCHWORK_ENDPOINT="+e.r.URL, "BATCHWORK_OWNER=py-tester", localauth.TokenEnv+"="+e.r.Token)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python -m unittest: %v\n%s", err, out)
	}
	// Every test ran: none skipped (the live ones skip without a runner),
	// and the live ones are there.
	if regexp.MustCompile(`(?m)\.\.\. skipped|skipped=`).Match(out) {
		t.Fatalf("python tests were skipped:\n%s", out)
	}
	for _, name := range []string{"test_submit_wait_and_read_the_result", "test_cancel_a_running_job", "test_errors"} {
		if !regexp.MustCompile(`(?m)^` + name + ` .*\.\.\. ok$`).Match(out) {
			t.Fatalf("python test %s did not pass:\n%s", name, out)
		}
	}
	if testing.Verbose() {
		t.Logf("python -m unittest:\n%s", out)
	}
}
