// Package scaffold writes the new Go project of `batchwork init`: an
// executor with one example task, its test, a job spec and sample data, a
// CDK app deploying Batchwork with that executor, a Makefile and a README.
// The project requires this module at the command's own version, or a
// checkout of it through a replace directive.
package scaffold

import (
	"bytes"
	"context"
	"embed"
	"errors"
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

// The project's files: each is a text/template (data: Project) named as in
// the new project plus ".tmpl", so that no go.mod or .go file in it means
// anything to this module's go tooling; "gitignore" becomes ".gitignore".
// Files without ".tmpl" are copied as they are.
//
//go:embed templates
var templates embed.FS

// Module is this module's path, which a project requires.
const Module = "github.com/batchwork/batchwork"

// goVersion is the go directive of a new project: this module's (go mod
// tidy raises it if a dependency needs more).
const goVersion = "1.26.0"

// DevelVersion is the version a project requires when a replace names the
// module's directory and the command knows no release of its own (built
// from a checkout): any version will do under a replace.
const DevelVersion = "v0.0.0-00010101000000-000000000000"

// UsageError is a request the caller must change (the directory, the
// module path, the checkout), not a failure of the machine.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

// Project fills the templates.
type Project struct {
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

// NeedsTidy reports a project that requires a released version: go mod
// tidy must download what its go.sum needs (Tidy). One made from a
// checkout has the checkout's go.sum already.
func (p Project) NeedsTidy() bool { return p.goSum == nil }

// New checks the command line (the new project's directory, -module and
// -replace) and works out the templates' data. Its refusals are
// *UsageError.
func New(dir, mod, replace string) (Project, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Project{}, err
	}
	name := filepath.Base(abs)
	if mod == "" {
		mod = name
	}
	if err := module.CheckImportPath(mod); err != nil {
		if mod == name {
			return Project{}, &UsageError{fmt.Sprintf("DIR %q: its name is not a valid module path (%v); choose one with -module", dir, err)}
		}
		return Project{}, &UsageError{fmt.Sprintf("-module %q: %v", mod, err)}
	}
	d := Project{Module: mod, Name: path.Base(mod), Stack: stackName(path.Base(mod)), GoVersion: goVersion}
	version := ownVersion()
	if replace != "" {
		rdir, err := filepath.Abs(replace)
		if err != nil {
			return d, err
		}
		if d.Requires, d.goSum, err = checkoutRequirements(rdir); err != nil {
			return d, &UsageError{fmt.Sprintf("-replace %s: %v", replace, err)}
		}
		d.Replace = modfile.AutoQuote(rdir)
		if version == "" {
			version = DevelVersion
		}
	}
	if version == "" {
		hint := "the checkout's directory"
		if dir := builtFrom(); dir != "" {
			hint = dir
		}
		return d, &UsageError{"this batchwork command was built from a checkout and knows no Batchwork version to require: " +
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
	if bi.Main.Path == Module {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			return v
		}
		return ""
	}
	for _, dep := range bi.Deps {
		if dep.Path == Module && dep.Version != "" && dep.Version != "(devel)" {
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
	dir := filepath.Join(filepath.Dir(file), "..", "..", "..") // cmd/batchwork/scaffold
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
	if f.Module == nil || f.Module.Mod.Path != Module {
		return nil, nil, fmt.Errorf("its go.mod is not module %s", Module)
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

// Write renders the templates into dir, which must not exist or be empty
// (else a *UsageError): a scaffold never overwrites anyone's files.
func Write(dir string, d Project) error {
	entries, err := os.ReadDir(dir)
	switch {
	case err == nil && len(entries) > 0:
		return &UsageError{fmt.Sprintf("%s is not empty: give a new directory (init never overwrites files)", dir)}
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	err = fs.WalkDir(templates, "templates", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := templates.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "templates/")
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

// Tidy runs go mod tidy in the project written in dir, so that its go.sum
// has what a released version needs; the error carries go's output.
func Tidy(ctx context.Context, dir string) error {
	cmd := exec.CommandContext(ctx, "go", "mod", "tidy")
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go mod tidy in %s: %w\n%s\nthe project is written; fix the above and run 'go mod tidy' there", dir, err, strings.TrimSpace(out.String()))
	}
	return nil
}

func writeFile(dst string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}
