package integration

import (
	"context"
	"fmt"
	"io/fs"
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
// cancelled). Its unit tests (a stub server) run in the same command,
// against the package as pip installs it from the checkout, so a module or
// data file (py.typed) that the packaging leaves out fails here.
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
	site := installPythonClient(ctx, t, py, root)
	cmd := exec.CommandContext(ctx, py, "-m", "unittest", "discover", "-v", "-s", filepath.Join(root, "clients", "python", "tests"))
	cmd.Env = pythonEnv("PYTHONPATH="+site, "BATCHWORK_PYCLIENT_LIVE=1",
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

// installPythonClient installs clients/python with pip, offline and
// without its build isolation (the virtualenv's pinned setuptools builds
// it), into a folder of its own, and returns that folder. pip builds in
// the tree it is given and setuptools keeps build/ there between builds,
// so a module deleted from src/ would still be packaged: the tree is
// copied first, without what a build leaves, which also keeps the
// checkout clean.
func installPythonClient(ctx context.Context, t *testing.T, py, root string) string {
	t.Helper()
	src := filepath.Join(t.TempDir(), "python")
	if err := copyPackageTree(filepath.Join(root, "clients", "python"), src); err != nil {
		t.Fatal(err)
	}
	site := filepath.Join(t.TempDir(), "site")
	cmd := exec.CommandContext(ctx, py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir",
		"--no-deps", "--no-build-isolation", "--no-index", "--target", site, src)
	cmd.Env = pythonEnv("PIP_CONFIG_FILE=" + os.DevNull) // a user's pip.conf (user = true, an index) does not apply
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pip install clients/python: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(site, "batchwork", "py.typed")); err != nil {
		t.Fatalf("the installed package has no py.typed: %v", err)
	}
	// The tests import the installed package, not one from elsewhere.
	cmd = exec.CommandContext(ctx, py, "-c", "import batchwork; print(batchwork.__file__)")
	cmd.Env = pythonEnv("PYTHONPATH=" + site)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("import batchwork: %v", err)
	}
	if got := strings.TrimSpace(string(out)); got != filepath.Join(site, "batchwork", "__init__.py") {
		t.Fatalf("batchwork is imported from %s, not from %s", got, site)
	}
	return site
}

// copyPackageTree copies the package's source tree from to to, without
// the folders a build or a run leaves in it.
func copyPackageTree(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			if rel == "build" || d.Name() == "__pycache__" || strings.HasSuffix(d.Name(), ".egg-info") {
				return filepath.SkipDir
			}
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	})
}
