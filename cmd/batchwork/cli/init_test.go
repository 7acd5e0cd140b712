package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"go/format"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/modfile"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/scaffold"
	"github.com/batchwork/batchwork/shared/spec"
)

// checkout is this repository's root, for -replace.
const checkout = "../../.."

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Now: time.Now, Loc: time.UTC, Sleep: client.Sleep}
	code = Main(context.Background(), args, env)
	return code, out.String(), errb.String()
}

// TestInitWritesProject: the scaffold is a module requiring this checkout
// (replace, its requirements and go.sum, the CLI as a tool) whose Go files
// are formatted, whose spec is valid and names the task main.go
// registers, and whose Makefile has dev and deploy.
func TestInitWritesProject(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "hello")
	code, stdout, stderr := runCLI(t, "init", "-module", "example.com/jobs/hello", "-replace", checkout, dir)
	if code != ExitOK {
		t.Fatalf("init: exit %d, stderr %s", code, stderr)
	}
	if !strings.Contains(stdout, "make dev") {
		t.Errorf("init's output says nothing of make dev:\n%s", stdout)
	}
	read := func(name string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	mod, err := modfile.Parse("go.mod", read("go.mod"), nil)
	if err != nil {
		t.Fatalf("go.mod: %v", err)
	}
	abs, _ := filepath.Abs(checkout)
	if got := mod.Module.Mod.Path; got != "example.com/jobs/hello" {
		t.Errorf("module %q", got)
	}
	if len(mod.Replace) != 1 || mod.Replace[0].Old.Path != scaffold.Module || mod.Replace[0].New.Path != abs {
		t.Errorf("replace %+v, want %s => %s", mod.Replace, scaffold.Module, abs)
	}
	if len(mod.Tool) != 1 || mod.Tool[0].Path != scaffold.Module+"/cmd/batchwork" {
		t.Errorf("tool %+v, want the batchwork command", mod.Tool)
	}
	own, _ := modfile.Parse("go.mod", mustRead(t, filepath.Join(checkout, "go.mod")), nil)
	want := map[string]string{scaffold.Module: scaffold.DevelVersion}
	for _, r := range own.Require {
		want[r.Mod.Path] = r.Mod.Version
	}
	got := map[string]string{}
	for _, r := range mod.Require {
		got[r.Mod.Path] = r.Mod.Version
	}
	for p, v := range want {
		if got[p] != v {
			t.Errorf("require %s %q, want %q (the checkout's)", p, got[p], v)
		}
	}
	if !bytes.Equal(read("go.sum"), mustRead(t, filepath.Join(checkout, "go.sum"))) {
		t.Error("go.sum is not the checkout's")
	}
	for _, f := range []string{"main.go", "main_test.go", "infra/main.go"} {
		src := read(f)
		fmted, err := format.Source(src)
		if err != nil {
			t.Errorf("%s does not parse: %v", f, err)
		} else if !bytes.Equal(fmted, src) {
			t.Errorf("%s is not gofmt'd", f)
		}
	}
	if !bytes.Contains(read("infra/main.go"), []byte(`jsii.String("Hello")`)) {
		t.Error("infra/main.go: the stack is not named after the project (Hello)")
	}
	job, err := spec.Parse(read("job.json"))
	if err != nil {
		t.Fatalf("job.json: %v", err)
	}
	task := job.Stages[0].Task
	if !bytes.Contains(read("main.go"), []byte(`batchwork.Register("`+task+`"`)) {
		t.Errorf("job.json runs task %q, which main.go does not register", task)
	}
	if !strings.HasPrefix(job.Stages[0].Partitions.Input.Prefix, "inputs:data/") {
		t.Errorf("job.json reads %q, not the data/ that dev uploads", job.Stages[0].Partitions.Input.Prefix)
	}
	read("data/sample.txt")
	makefile := string(read("Makefile"))
	// The CDK CLI is the version package.json pins, as this repository's
	// is, never whatever npx finds; synth prints no template.
	for _, rule := range []string{"dev:\n\t$(GO) tool batchwork dev", "CDK := node_modules/.bin/cdk\n",
		"synth: node_modules/go.mod\n\t$(CDK) synth --quiet", "deploy: node_modules/go.mod\n\t$(CDK) deploy"} {
		if !strings.Contains(makefile, rule) {
			t.Errorf("Makefile lacks %q", rule)
		}
	}
	if strings.Contains(makefile, "npx") {
		t.Error("Makefile runs npx: an unpinned CDK CLI")
	}
	var pkg, repoPkg struct {
		DevDependencies map[string]string `json:"devDependencies"`
	}
	if err := json.Unmarshal(read("package.json"), &pkg); err != nil {
		t.Fatalf("package.json: %v", err)
	}
	if err := json.Unmarshal(mustRead(t, filepath.Join(checkout, "package.json")), &repoPkg); err != nil {
		t.Fatal(err)
	}
	if v := pkg.DevDependencies["aws-cdk"]; v == "" || v != repoPkg.DevDependencies["aws-cdk"] {
		t.Errorf("package.json pins aws-cdk %q, want the repository's exact %q", v, repoPkg.DevDependencies["aws-cdk"])
	}
	if !strings.Contains(string(read(".gitignore")), "/node_modules/") {
		t.Error(".gitignore does not ignore node_modules")
	}
	for _, f := range []string{"README.md", "Dockerfile", "cdk.json", ".gitignore"} {
		read(f)
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInitRefuses: what init will not do, each with an error that names
// the problem, and nothing written.
func TestInitRefuses(t *testing.T) {
	notCheckout := t.TempDir()
	for _, tc := range []struct {
		name  string
		setup func(dir string)
		args  []string
		want  string
	}{
		{"a non-empty directory", func(dir string) {
			_ = os.MkdirAll(dir, 0o755)
			_ = os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("mine"), 0o644)
		}, []string{"-replace", checkout}, "is not empty"},
		{"an invalid module path", nil, []string{"-module", "bad path!", "-replace", checkout}, `-module "bad path!"`},
		{"a replace that is no checkout", nil, []string{"-replace", notCheckout}, "-replace " + notCheckout + ": not a Batchwork checkout"},
		// This test binary is a build from a checkout: no version.
		{"no version to require", nil, nil, "pass -replace " + mustAbs(t, checkout) + ","},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "proj")
			if tc.setup != nil {
				tc.setup(dir)
			}
			code, _, stderr := runCLI(t, append(append([]string{"init"}, tc.args...), dir)...)
			if code != ExitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, ExitUsage, tc.want)
			}
			entries, _ := os.ReadDir(dir)
			if tc.setup == nil && len(entries) > 0 {
				t.Errorf("init wrote %d files after refusing", len(entries))
			}
			if tc.setup != nil {
				if b, _ := os.ReadFile(filepath.Join(dir, "keep.txt")); string(b) != "mine" || len(entries) != 1 {
					t.Errorf("init touched the non-empty directory: %d entries", len(entries))
				}
			}
		})
	}
}
