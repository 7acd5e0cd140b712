// Command batchwork is Batchwork's command line: submit, watch, list,
// cancel and fetch the results of jobs, against a deployed API (SigV4) or
// the local runner. Run 'batchwork help' for commands and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], cli.OSEnv())
	stop()
	os.Exit(code)
}
