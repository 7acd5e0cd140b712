// Package gobuild builds a user's Go executor and asks it for its task
// names, for the CDK construct (at synth time) and for `batchwork dev`.
// It runs the go tool that is on the PATH, in the user's module.
package gobuild

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// EnvListTasks makes an executor built on shared/batchwork print its task
// names as a JSON array on stdout and exit (batchwork.Main).
const EnvListTasks = "BATCHWORK_LIST_TASKS"

// LambdaFlags are `make build`'s flags for a provided.al2023 bootstrap, so
// that a build after `make build` finds every package in Go's cache.
var LambdaFlags = []string{"-tags", "lambda.norpc", "-trimpath", "-ldflags=-s -w"}

// ListTimeout bounds the run that lists an executor's tasks: it only
// registers functions and prints, so a hang is a bug worth naming.
const ListTimeout = 30 * time.Second

// Build builds the main package pkg in module directory dir ("" is the
// working directory) into the file out, for goos/goarch ("" for this
// machine's), statically (CGO_ENABLED=0: the binary needs no C library of
// the target's). go's output is in the error.
func Build(dir, pkg, out, goos, goarch string, flags ...string) error {
	env := append(os.Environ(), "CGO_ENABLED=0")
	if goos != "" {
		env = append(env, "GOOS="+goos, "GOARCH="+goarch)
	} else {
		// The caller's GOOS/GOARCH (a cross-compiling shell) would build
		// a binary this machine cannot run.
		env = slices.DeleteFunc(env, func(kv string) bool {
			return strings.HasPrefix(kv, "GOOS=") || strings.HasPrefix(kv, "GOARCH=")
		})
	}
	args := append(append([]string{"build"}, flags...), "-o", out, pkg)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = env
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		where := dir
		if where == "" {
			where = "."
		}
		return fmt.Errorf("go %s (in %s): %w\n%s", strings.Join(args, " "), where, err, strings.TrimSpace(output.String()))
	}
	return nil
}

// ListTasks runs the executor binary bin with BATCHWORK_LIST_TASKS=1 and
// returns the task names it printed, sorted and without repeats. pkg names
// the executor in errors.
func ListTasks(ctx context.Context, bin, pkg string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, ListTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	// Not a Lambda host, whatever the caller's environment says: Main
	// must take the listing path.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "AWS_LAMBDA_RUNTIME_API=") })
	cmd.Env = append(env, EnvListTasks+"=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run %s with %s=1: %w\n%s", pkg, EnvListTasks, err, strings.TrimSpace(stderr.String()))
	}
	var names []string
	if err := json.Unmarshal(stdout.Bytes(), &names); err != nil {
		out := stdout.String()
		if len(out) > 200 {
			out = out[:200] + "..."
		}
		return nil, fmt.Errorf("%s with %s=1 printed %q, not a JSON array of task names (does its main call batchwork.Main?): %w",
			pkg, EnvListTasks, out, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}
