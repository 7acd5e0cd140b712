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

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/provision"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/spec"
)

// checkout is this repository's root, for -replace.
const checkout = "../../.."

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Now: time.Now, Loc: time.UTC, Sleep: sleepCtx}
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
	if len(mod.Replace) != 1 || mod.Replace[0].Old.Path != BatchworkModule || mod.Replace[0].New.Path != abs {
		t.Errorf("replace %+v, want %s => %s", mod.Replace, BatchworkModule, abs)
	}
	if len(mod.Tool) != 1 || mod.Tool[0].Path != BatchworkModule+"/cmd/batchwork" {
		t.Errorf("tool %+v, want the batchwork command", mod.Tool)
	}
	own, _ := modfile.Parse("go.mod", mustRead(t, filepath.Join(checkout, "go.mod")), nil)
	want := map[string]string{BatchworkModule: develVersion}
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

func TestStackName(t *testing.T) {
	for in, want := range map[string]string{"hello": "Hello", "my-job_2": "MyJob2", "9lives": "Batchwork9lives", "---": "Batchwork", "étoile": "Toile"} {
		if got := stackName(in); got != want {
			t.Errorf("stackName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestFindEmulatorServers: dev finds moto and DynamoDB Local in the
// search directories in order, leaves alone what the user set, and
// without them fails saying how to install them.
func TestFindEmulatorServers(t *testing.T) {
	install := func(dir string, moto, dynamo bool) string {
		if moto {
			p := filepath.Join(dir, ".venv", "bin", "moto_server")
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
		}
		if dynamo {
			p := filepath.Join(dir, ".dynamodb-local", "lib", "DynamoDBLocal-2.5.jar")
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.WriteFile(p, nil, 0o644)
		}
		return dir
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		// which of user, module and cache dirs hold moto and DynamoDB Local
		user, mod, cache [2]bool
		want             map[string]string // dir names: "user", "mod", "cache"
		err              []string
	}{
		{name: "beside the user's module first", user: [2]bool{true, true}, mod: [2]bool{true, true},
			want: map[string]string{emulator.EnvMotoServer: "user", emulator.EnvDynamoDBLocalDir: "user"}},
		{name: "the batchwork module's", mod: [2]bool{true, true}, cache: [2]bool{true, true},
			want: map[string]string{emulator.EnvMotoServer: "mod", emulator.EnvDynamoDBLocalDir: "mod"}},
		{name: "the cache", mod: [2]bool{true, false}, cache: [2]bool{false, true},
			want: map[string]string{emulator.EnvMotoServer: "mod", emulator.EnvDynamoDBLocalDir: "cache"}},
		{name: "moto's DynamoDB needs no DynamoDB Local", env: map[string]string{emulator.EnvDynamoDB: "moto"}, cache: [2]bool{true, false},
			want: map[string]string{emulator.EnvMotoServer: "cache"}},
		{name: "the user's settings win", env: map[string]string{emulator.EnvMotoServer: "/opt/moto"}, cache: [2]bool{true, true},
			want: map[string]string{emulator.EnvDynamoDBLocalDir: "cache"}},
		{name: "an endpoint needs neither", env: map[string]string{emulator.EnvEndpointURL: "http://127.0.0.1:4566"}, want: map[string]string{}},
		{name: "nothing installed",
			err: []string{"moto and DynamoDB Local not found", "pip install -r MOD/internal/emulator/requirements.txt",
				"-DoutputDirectory=CACHE/.dynamodb-local/lib", emulator.EnvDynamoDB + "=moto", emulator.EnvEndpointURL}},
		{name: "only DynamoDB Local missing", user: [2]bool{true, false},
			err: []string{"DynamoDB Local not found", "mvn"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dirs := map[string]string{}
			for name, has := range map[string][2]bool{"user": tc.user, "mod": tc.mod, "cache": tc.cache} {
				dirs[name] = install(filepath.Join(root, name), has[0], has[1])
			}
			s := serverSearch{dirs: []string{dirs["user"], dirs["mod"], dirs["cache"]}, modDir: dirs["mod"], cache: dirs["cache"]}
			set := map[string]string{}
			err := findEmulatorServers(func(k string) string { return tc.env[k] },
				func(k, v string) error { set[k] = v; return nil }, s)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("no error; set %v", set)
				}
				msg := strings.NewReplacer(dirs["mod"], "MOD", dirs["cache"], "CACHE").Replace(err.Error())
				for _, w := range tc.err {
					if !strings.Contains(msg, w) {
						t.Errorf("error %q lacks %q", msg, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for k, where := range tc.want {
				if !strings.HasPrefix(set[k], dirs[where]+string(filepath.Separator)) {
					t.Errorf("%s = %q, want under %s", k, set[k], where)
				}
			}
			if len(set) != len(tc.want) {
				t.Errorf("set %v, want only %v", set, tc.want)
			}
		})
	}
}

// TestExecutorEnv: dev's executor gets the runner's resources on the
// emulator, the emulator's dummy credentials and the programs directory,
// never the user's AWS or other Batchwork settings.
func TestExecutorEnv(t *testing.T) {
	r := &runner.Runner{Resources: provision.Resources{Table: "T", Bucket: "B",
		Queues: control.Queues{High: "qh", Normal: "qn", Low: "ql", DLQ: "qd"}}}
	emu := &emulator.Emulator{URL: "http://127.0.0.1:1", DynamoURL: "http://127.0.0.1:2", Region: "eu-west-1"}
	env := executorEnv([]string{"HOME=/home/u", "AWS_PROFILE=prod", "AWS_SECRET_ACCESS_KEY=real", "BATCHWORK_ENDPOINT=https://x", "AWS_SESSION_TOKEN=tok",
		"BATCHWORK_EXEC_DIR=/elsewhere"}, r, emu, "/abs/programs")
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	want := map[string]string{
		"HOME": "/home/u", "BATCHWORK_TABLE": "T", "BATCHWORK_BUCKET": "B", "BATCHWORK_QUEUE_HIGH": "qh",
		"BATCHWORK_QUEUE_NORMAL": "qn", "BATCHWORK_QUEUE_LOW": "ql", "BATCHWORK_DLQ": "qd", "BATCHWORK_SLOTS": "4",
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "eu-west-1",
		"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_ENDPOINT_URL_DYNAMODB": "http://127.0.0.1:2",
		// The programs directory dev resolved (devExecDir), so exec stages run.
		"BATCHWORK_EXEC_DIR": "/abs/programs",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	for _, k := range []string{"AWS_PROFILE", "AWS_SESSION_TOKEN", "BATCHWORK_ENDPOINT"} {
		if _, ok := got[k]; ok {
			t.Errorf("%s passed to the executor", k)
		}
	}
}
