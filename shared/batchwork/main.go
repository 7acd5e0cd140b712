package batchwork

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/batchwork/batchwork/internal/host"
)

// Environment variables Main reads to choose its host (the hosts' own
// configuration is shared/lambdaenv's, plus BATCHWORK_SLOTS).
const (
	// EnvListTasks set to "1" makes Main print the registered task names
	// as a JSON array on stdout and exit 0.
	EnvListTasks = "BATCHWORK_LIST_TASKS"
	// EnvLambdaRuntime is set by AWS Lambda: Main runs the Lambda host.
	EnvLambdaRuntime = "AWS_LAMBDA_RUNTIME_API"
)

// Main runs the functions registered with Register (the DefaultRegistry)
// as the host the environment asks for (see the package documentation),
// and exits the process: with status 1 after an error, or 0 when the
// long-polling host has drained after SIGTERM or an interrupt. It does
// not return.
func Main() {
	os.Exit(run(DefaultRegistry, os.Getenv, os.Stdout, os.Stderr))
}

// run is Main, with its registry, environment and streams as arguments,
// returning the exit status.
func run(reg *Registry, getenv func(string) string, stdout, stderr io.Writer) int {
	prog := filepath.Base(os.Args[0])
	names := reg.Names()
	if getenv(EnvListTasks) == "1" {
		if err := json.NewEncoder(stdout).Encode(names); err != nil {
			fmt.Fprintf(stderr, "%s: list tasks: %v\n", prog, err)
			return 1
		}
		return 0
	}
	if len(names) == 0 {
		// It could only claim tasks to fail them as unknown.
		fmt.Fprintf(stderr, "%s: no task functions registered: call batchwork.Register before batchwork.Main\n", prog)
		return 1
	}
	tasks := host.Tasks{Registry: reg.exec, Names: names}
	if getenv(EnvLambdaRuntime) != "" {
		host.Lambda(tasks) // does not return
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := host.Poll(ctx, tasks); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", prog, err)
		return 1
	}
	return 0
}
