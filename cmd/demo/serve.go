package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/batchwork/batchwork/internal/console"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
)

// serve keeps the demo's runner up after the job, with its API on
// serveAddr, so the batchwork CLI can be tried against it (make demo
// SERVE=1; see docs/cli.md).
var serve bool

const serveAddr = "127.0.0.1:8080"

// consoleAddr is where the demo serves the web console, as 'batchwork ui'
// does by default.
const consoleAddr = "127.0.0.1:8090"

// serveListen is -listen: serveAddr unless a test or a busy port asks
// for another.
var serveListen = serveAddr

func listenAddr() string {
	if serve {
		return serveListen
	}
	return "" // a free loopback port
}

// tokenDir is where the runner leaves its API token for the batchwork CLI:
// only when serving, since otherwise no other process talks to it and the
// token stays in this one.
func tokenDir() (string, error) {
	if !serve {
		return "", nil
	}
	dir, err := localauth.DefaultDir(os.Getenv)
	if err != nil {
		return "", fmt.Errorf("-serve: %w", err)
	}
	return dir, nil
}

// sleepTask is a slow task for trying watch and cancel: it sleeps for its
// partition's "seconds" parameter (default 2) and stops when cancelled.
func sleepTask(ctx context.Context, t *batchwork.Task) error {
	d := 2 * time.Second
	if s, err := strconv.ParseFloat(t.Params["seconds"], 64); err == nil {
		d = time.Duration(s * float64(time.Second))
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
	}
	_, err := fmt.Fprintf(t.Out, "slept %s in partition %d\n", d, t.Partition)
	return err
}

const slowSpec = `# 40 tasks of 2 s each: time to watch, and to cancel.
name: slow
lease: 10s
stages:
  - name: nap
    task: demo.sleep
    partitions: {count: 40}
  - name: wake
    task: demo.sleep
    after: [nap]
    partitions: {count: 4}
`

// serveCLI writes ready-to-submit specs and keeps the runner up until ^C.
func serveCLI(ctx context.Context, r *runner.Runner, wordcountSpec []byte) error {
	dir := filepath.Join(os.TempDir(), "batchwork-demo")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, body := range map[string][]byte{"wordcount.yaml": wordcountSpec, "slow.yaml": []byte(slowSpec)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return err
		}
	}
	// The web console, as 'batchwork ui' serves it, in this process.
	consoleLine := ""
	if c, err := startConsole(ctx, r); err != nil {
		consoleLine = fmt.Sprintf("web console: not started (%v); try: bin/batchwork ui --listen 127.0.0.1:0", err)
	} else {
		consoleLine = "web console (open it in a browser): " + c.URL()
	}
	fmt.Printf(`
==> %s
==> the runner stays up for the batchwork CLI until Ctrl-C: API %s, owner "demo"
    Every request needs this run's token, in %s (yours alone; the CLI reads it there).
    In another terminal:
      go build -o bin/batchwork ./cmd/batchwork
      export BATCHWORK_OWNER=demo
      bin/batchwork list
      bin/batchwork submit %s --wait
      bin/batchwork submit %s && bin/batchwork watch <id>    # then: bin/batchwork cancel <id>
      bin/batchwork ui --listen 127.0.0.1:0                  # another web console, as any user of the CLI starts it
`, consoleLine, r.URL, r.TokenFile, filepath.Join(dir, "wordcount.yaml"), filepath.Join(dir, "slow.yaml"))
	<-ctx.Done()
	return nil
}

// startConsole serves the web console (internal/console, what 'batchwork
// ui' runs) on consoleAddr against the runner's API as the demo's owner.
func startConsole(ctx context.Context, r *runner.Runner) (*console.Server, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	up := func(ctx context.Context, method, path string, q url.Values) (int, []byte, error) {
		u := r.URL + path
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		req, err := http.NewRequestWithContext(ctx, method, u, nil)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set(runner.OwnerHeader, demoOwner)
		localauth.SetHeader(req, r.Token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		return resp.StatusCode, body, err
	}
	return console.Start(ctx, consoleAddr, console.Options{API: r.URL, Upstream: up})
}
