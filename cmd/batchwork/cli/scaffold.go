package cli

import (
	"bytes"
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"text/template"
	"unicode"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
)

// The scaffold's files: each is a text/template (data: scaffoldData) named
// as in the new project plus ".tmpl", so that no go.mod or .go file in it
// means anything to this module's go tooling; "gitignore" becomes
// ".gitignore". Files without ".tmpl" are copied as they are.
//
//go:embed scaffold
var scaffoldFS embed.FS

// BatchworkModule is this module's path, which a scaffold requires.
const BatchworkModule = "github.com/batchwork/batchwork"

// scaffoldGoVersion is the go directive of a new project: this module's
// (go mod tidy raises it if a dependency needs more).
const scaffoldGoVersion = "1.26"

// develVersion is the version a project requires when a replace names the
// module's directory and the CLI knows no release of its own (built from
// a checkout): any version will do under a replace.
const develVersion = "v0.0.0-00010101000000-000000000000"

var initCommand = &command{name: "init", args: "DIR", summary: "create a new Go project for your own tasks: executor, job spec, CDK app, Makefile",
	help: `Creates DIR (which must not exist or be empty) holding a new Go module for your
own Batchwork tasks:

  main.go          your executor, with one example task (hello.upper)
  main_test.go     its unit test (batchwork.RunTask: no AWS needed)
  job.json         a job spec running it over data/sample.txt
  infra/main.go    a CDK app deploying Batchwork with your executor (cdk.json)
  Makefile         make dev (run job.json locally), make test, make deploy (cdk deploy)
  package.json     pins the CDK CLI the Makefile runs
  Dockerfile       the image for the Fargate executor, if you want one
  README.md

go.mod requires github.com/batchwork/batchwork at this command's version, and
lists this command as a tool (go tool batchwork, which make dev runs); go mod
tidy then fetches the dependencies. With -replace PATH it uses the Batchwork
checkout in PATH instead, starting from the checkout's requirements and go.sum,
so the project builds offline from the module cache the checkout filled.`,
	examples: []string{
		"batchwork init myjob && cd myjob && make dev",
		"batchwork init -module example.com/etl/nightly ./nightly",
		"batchwork init -replace ~/src/batchwork ./try",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.module, "module", "", "the new module's path (default: DIR's base name)")
		fs.StringVar(&o.replace, "replace", "", "use the Batchwork checkout in this directory (a replace directive) instead of a released version")
	},
	minArgs: 1, maxArgs: 1, run: runInit}

// scaffoldData fills the templates.
type scaffoldData struct {
	Module, Name, Stack string
	GoVersion, Version  string
	// Replace is the Batchwork checkout's directory, quoted for go.mod;
	// "" for none.
	Replace string
	// Requires are the checkout's requirements ("path version"), and
	// goSum its go.sum, with Replace only.
	Requires []string
	goSum    []byte
}

func runInit(ctx context.Context, a *app, args []string) int {
	dir := args[0]
	d, err := newScaffoldData(dir, a.o.module, a.o.replace)
	if err != nil {
		return a.fail(err)
	}
	if err := writeScaffold(dir, d); err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(a.env.Stdout, "Created %s (module %s)\n", dir, d.Module)
	if d.goSum == nil {
		// A released version: tidy downloads what go.sum needs.
		cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return a.fail(fmt.Errorf("go mod tidy in %s: %w\n%s\nthe project is written; fix the above and run 'go mod tidy' there", dir, err, strings.TrimSpace(out.String())))
		}
	}
	fmt.Fprintf(a.env.Stdout, `
Next:
  cd %s
  make dev       # run job.json on your machine (emulated AWS), print the results
  make deploy    # deploy to your AWS account (cdk deploy; make bootstrap once first)
Your task is in main.go; README.md says more.
`, dir)
	return ExitOK
}

// newScaffoldData checks the command line and works out the templates'
// data.
func newScaffoldData(dir, mod, replace string) (scaffoldData, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return scaffoldData{}, err
	}
	name := filepath.Base(abs)
	if mod == "" {
		mod = name
	}
	if err := module.CheckImportPath(mod); err != nil {
		if mod == name {
			return scaffoldData{}, &usageError{fmt.Sprintf("DIR %q: its name is not a valid module path (%v); choose one with -module", dir, err)}
		}
		return scaffoldData{}, &usageError{fmt.Sprintf("-module %q: %v", mod, err)}
	}
	d := scaffoldData{Module: mod, Name: path.Base(mod), Stack: stackName(path.Base(mod)), GoVersion: scaffoldGoVersion}
	version := ownVersion()
	if replace != "" {
		rdir, err := filepath.Abs(replace)
		if err != nil {
			return d, err
		}
		if d.Requires, d.goSum, err = checkoutRequirements(rdir); err != nil {
			return d, &usageError{fmt.Sprintf("-replace %s: %v", replace, err)}
		}
		d.Replace = modfile.AutoQuote(rdir)
		if version == "" {
			version = develVersion
		}
	}
	if version == "" {
		hint := "the checkout's directory"
		if dir := builtFrom(); dir != "" {
			hint = dir
		}
		return d, &usageError{"this batchwork command was built from a checkout and knows no Batchwork version to require: " +
			"pass -replace " + hint + ", or install a release (go install github.com/batchwork/batchwork/cmd/batchwork@latest)"}
	}
	d.Version = version
	return d, nil
}

// ownVersion is the version of Batchwork this command was built from: the
// main module's when built as `go install .../cmd/batchwork@v1.2.3`, the
// dependency's when run as a tool of another module (go tool batchwork);
// "" when built from a checkout.
func ownVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	if bi.Main.Path == BatchworkModule {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		return ""
	}
	for _, dep := range bi.Deps {
		if dep.Path == BatchworkModule && dep.Version != "" && dep.Version != "(devel)" {
			return dep.Version
		}
	}
	return ""
}

// builtFrom is the checkout this command was built from, when the build
// kept source paths (no -trimpath) and the checkout is still there; "".
func builtFrom() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return ""
	}
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..") // cmd/batchwork/cli
	if _, _, err := checkoutRequirements(dir); err != nil {
		return ""
	}
	return dir
}

// checkoutRequirements reads the Batchwork checkout in dir: its go.mod's
// requirements and its go.sum. A project that starts from them has the
// checkout's build list, so it builds from the module cache the checkout
// already filled, offline too (go mod tidy would not: it also resolves
// the tests of dependencies that predate module graph pruning, which
// nothing here builds).
func checkoutRequirements(dir string) (reqs []string, sum []byte, err error) {
	raw, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return nil, nil, fmt.Errorf("not a Batchwork checkout: %w", err)
	}
	f, err := modfile.ParseLax("go.mod", raw, nil)
	if err != nil {
		return nil, nil, err
	}
	if f.Module == nil || f.Module.Mod.Path != BatchworkModule {
		return nil, nil, fmt.Errorf("its go.mod is not module %s", BatchworkModule)
	}
	for _, r := range f.Require {
		reqs = append(reqs, r.Mod.Path+" "+r.Mod.Version)
	}
	if sum, err = os.ReadFile(filepath.Join(dir, "go.sum")); err != nil {
		return nil, nil, fmt.Errorf("its go.sum: %w", err)
	}
	return reqs, sum, nil
}

// stackName is the CloudFormation stack name for a project: letters and
// digits of its name, in CamelCase, starting with a letter.
func stackName(name string) string {
	var b strings.Builder
	upper := true
	for _, r := range name {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)) {
			upper = true
			continue
		}
		if b.Len() == 0 && !unicode.IsLetter(r) {
			b.WriteString("Batchwork")
		}
		if upper {
			r = unicode.ToUpper(r)
		}
		upper = false
		b.WriteRune(r)
	}
	if b.Len() == 0 {
		return "Batchwork"
	}
	return b.String()
}

// writeScaffold renders the templates into dir, which must not exist or
// be empty: a scaffold never overwrites anyone's files.
func writeScaffold(dir string, d scaffoldData) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return &usageError{fmt.Sprintf("%s is not empty: give a new directory (init never overwrites files)", dir)}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	err = fs.WalkDir(scaffoldFS, "scaffold", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := scaffoldFS.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "scaffold/")
		if strings.HasSuffix(rel, ".tmpl") {
			rel = strings.TrimSuffix(rel, ".tmpl")
			t, err := template.New(rel).Option("missingkey=error").Parse(string(raw))
			if err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			var out bytes.Buffer
			if err := t.Execute(&out, d); err != nil {
				return fmt.Errorf("scaffold template %s: %w", rel, err)
			}
			raw = out.Bytes()
		}
		if path.Base(rel) == "gitignore" {
			rel = path.Join(path.Dir(rel), ".gitignore")
		}
		return writeFile(filepath.Join(dir, filepath.FromSlash(rel)), raw)
	})
	if err != nil || d.goSum == nil {
		return err
	}
	return writeFile(filepath.Join(dir, "go.sum"), d.goSum)
}

func writeFile(dst string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
