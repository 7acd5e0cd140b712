package main

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// TestScaffold is the user's path, proven: `batchwork init` makes a project
// in a new directory (pointed at this checkout with a replace), its CDK app
// synthesizes a stack whose Lambda executor is the project's own executor,
// built for linux/arm64 at synth time, whose task names the submitting
// functions know; and `make dev` (go tool batchwork dev) runs the
// project's job through that executor on the emulator and prints its
// output. Nothing is downloaded: the project builds from the module cache
// this checkout filled.
func TestScaffold(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a scaffolded project")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	checkout, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "hello")
	var stdout, stderr bytes.Buffer
	env := cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" },
		Now: time.Now, Loc: time.UTC, Sleep: func(context.Context, time.Duration) error { return nil }}
	if code := cli.Main(ctx, []string{"init", "-replace", checkout, dir}, env); code != cli.ExitOK {
		t.Fatalf("batchwork init: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}

	run := func(t *testing.T, name string, extraEnv []string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), extraEnv...)
		start := time.Now()
		out, err := cmd.CombinedOutput()
		t.Logf("%s: %.1fs", name, time.Since(start).Seconds())
		if err != nil {
			t.Fatalf("%s (go %s): %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	t.Run("test", func(t *testing.T) {
		run(t, "go test", nil, "test", "./...")
	})

	t.Run("synth", func(t *testing.T) {
		cdkOut := t.TempDir()
		run(t, "synth", []string{"CDK_OUTDIR=" + cdkOut, "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION=1"}, "run", "./infra")
		raw, err := os.ReadFile(filepath.Join(cdkOut, "Hello.template.json"))
		if err != nil {
			t.Fatal(err)
		}
		var tp struct {
			Resources map[string]struct {
				Type       string
				Properties struct {
					Code        struct{ S3Key string }
					Environment struct{ Variables map[string]any }
				}
			}
		}
		if err := json.Unmarshal(raw, &tp); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for id, r := range tp.Resources {
			if r.Type != "AWS::Lambda::Function" {
				continue
			}
			for _, fn := range []string{"Api", "Sweep", "Executor"} {
				if !strings.HasPrefix(id, "Batchwork"+fn) {
					continue
				}
				seen[fn] = true
				names, _ := r.Properties.Environment.Variables[lambdaenv.EnvTaskNames].(string)
				if want := map[bool]string{true: "", false: "hello.upper"}[fn == "Executor"]; names != want {
					t.Errorf("%s function: %s = %q, want %q", fn, lambdaenv.EnvTaskNames, names, want)
				}
				if fn != "Executor" {
					continue
				}
				asset := filepath.Join(cdkOut, "asset."+strings.TrimSuffix(r.Properties.Code.S3Key, ".zip"), "bootstrap")
				bin, err := os.ReadFile(asset)
				if err != nil {
					t.Fatalf("the executor's code: %v", err)
				}
				f, err := elf.NewFile(bytes.NewReader(bin))
				if err != nil || f.Machine != elf.EM_AARCH64 {
					t.Errorf("the executor's bootstrap is not a linux/arm64 binary (%v)", err)
				}
				if !bytes.Contains(bin, []byte("hello.upper")) {
					t.Error("the executor's bootstrap is not the project's executor (no hello.upper in it)")
				}
			}
		}
		if len(seen) != 3 {
			t.Errorf("functions found: %v; want Api, Sweep and Executor", seen)
		}
	})

	t.Run("dev", func(t *testing.T) {
		out := run(t, "make dev", nil, "tool", "batchwork", "dev", "job.json")
		for _, want := range []string{
			"tasks: hello.upper", "SUCCEEDED", "==> results",
			"BATCHWORK RUNS YOUR TASKS OVER YOUR DATA.",
			"THIS LINE AND THE TWO ABOVE COME BACK IN UPPER CASE.",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("dev's output lacks %q:\n%s", want, out)
			}
		}
	})
}
