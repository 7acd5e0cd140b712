// Command emulator starts an AWS API emulator (see package
// internal/emulator), prints
//
//	AWS_ENDPOINT_URL=<url>
//	AWS_ENDPOINT_URL_DYNAMODB=<url>
//
// on stdout (the second line only when DynamoDB has an endpoint of its
// own, DynamoDB Local by default) and the log paths on stderr, then runs
// until SIGINT/SIGTERM and stops it. Every AWS SDK and CLI sends DynamoDB
// to AWS_ENDPOINT_URL_DYNAMODB and the rest to AWS_ENDPOINT_URL.
//
// Usage:
//
//	emulator [-port N] [-env-file PATH]
//
// -port pins the moto server port (default: a free port); -env-file also
// writes the lines to PATH (atomically, once the emulator is healthy) and
// removes the file again on shutdown.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
)

func main() {
	port := flag.Int("port", 0, "pin the moto server port (0: pick a free port; ignored for other emulators)")
	envFile := flag.String("env-file", "", "also write the AWS_ENDPOINT_URL lines to this file (removed on exit)")
	flag.Parse()
	if flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "emulator: unexpected arguments %q\n", flag.Args())
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Stdout, os.Stderr, *port, *envFile)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run starts the emulator, announces it and blocks until ctx is done.
func run(ctx context.Context, stdout, stderr io.Writer, port int, envFile string) (err error) {
	e, err := emulator.StartWith(ctx, emulator.Options{Port: port, Localstack: localstack.Start})
	if err != nil {
		return err
	}
	defer func() {
		if serr := e.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()

	lines := "AWS_ENDPOINT_URL=" + e.URL + "\n"
	if e.DynamoURL != e.URL {
		lines += "AWS_ENDPOINT_URL_DYNAMODB=" + e.DynamoURL + "\n"
	}
	if envFile != "" {
		if err := writeFileAtomic(envFile, lines); err != nil {
			return fmt.Errorf("write env file: %w", err)
		}
		defer os.Remove(envFile)
	}
	fmt.Fprint(stdout, lines)
	fmt.Fprintf(stderr, "emulator: %s on %s (region %s), %s\n", e.Kind, e.URL, e.Region, logOf(e.LogPath))
	if e.DynamoURL != e.URL {
		fmt.Fprintf(stderr, "emulator: DynamoDB: %s on %s, %s\n", e.Dynamo, e.DynamoURL, logOf(e.DynamoLogPath))
	}

	<-ctx.Done()
	fmt.Fprintln(stderr, "emulator: stopping")
	return nil
}

func logOf(path string) string {
	if path == "" {
		return "no log file"
	}
	return "log: " + path
}

func writeFileAtomic(path, content string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Chmod(f.Name(), 0o644); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}
