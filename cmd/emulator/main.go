// Command emulator starts an AWS API emulator (see package
// integration/emulator), prints
//
//	AWS_ENDPOINT_URL=<url>
//
// on stdout and its log path on stderr, then runs until SIGINT/SIGTERM and
// stops it.
//
// Usage:
//
//	emulator [-port N] [-env-file PATH]
//
// -port pins the moto server port (default: a free port); -env-file also
// writes the AWS_ENDPOINT_URL=<url> line to PATH (atomically, once the
// emulator is healthy) and removes the file again on shutdown.
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

	"github.com/batchwork/batchwork/integration/emulator"
)

func main() {
	port := flag.Int("port", 0, "pin the moto server port (0: pick a free port; ignored for other emulators)")
	envFile := flag.String("env-file", "", "also write AWS_ENDPOINT_URL=<url> to this file (removed on exit)")
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
	e, err := emulator.StartWith(ctx, emulator.Options{Port: port})
	if err != nil {
		return err
	}
	defer func() {
		if serr := e.Stop(); serr != nil && err == nil {
			err = serr
		}
	}()

	line := "AWS_ENDPOINT_URL=" + e.URL
	if envFile != "" {
		if err := writeFileAtomic(envFile, line+"\n"); err != nil {
			return fmt.Errorf("write env file: %w", err)
		}
		defer os.Remove(envFile)
	}
	fmt.Fprintln(stdout, line)
	if e.LogPath != "" {
		fmt.Fprintf(stderr, "emulator: %s on %s (region %s), log: %s\n", e.Kind, e.URL, e.Region, e.LogPath)
	} else {
		fmt.Fprintf(stderr, "emulator: %s on %s (region %s), no log file\n", e.Kind, e.URL, e.Region)
	}

	<-ctx.Done()
	fmt.Fprintln(stderr, "emulator: stopping")
	return nil
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
