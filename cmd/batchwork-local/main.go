// Command batchwork-local runs all of Batchwork in one process against an
// AWS endpoint (an emulator, or a real account): it creates the resources,
// serves the API on loopback, and runs executor slots and the sweep.
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
	"time"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/join"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/faultenv"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tracing"
)

func main() {
	endpoint := flag.String("endpoint", os.Getenv("AWS_ENDPOINT_URL"),
		"AWS endpoint (an emulator); empty for AWS. A service's own variable wins, as in every AWS SDK (AWS_ENDPOINT_URL_DYNAMODB: DynamoDB Local)")
	prefix := flag.String("prefix", "batchwork", "resource name prefix")
	listen := flag.String("listen", "127.0.0.1:8080", "API address (loopback only: the owner header is trusted)")
	tokenFile := flag.String("token-file", os.Getenv(localauth.TokenFileEnv),
		"where to write this run's API token (mode 0600), which every request must carry as 'Authorization: Bearer <token>'; default $"+
			localauth.TokenFileEnv+", else local-<port>.token in $XDG_CONFIG_HOME/batchwork (~/.config/batchwork), where the batchwork CLI looks")
	slots := flag.Int("slots", 4, "executor slots; 0 runs the control plane only (API, sweep, timers), for separate executor processes")
	sweep := flag.Duration("sweep", 10*time.Second, "sweep interval")
	checkEvery := flag.Duration("check-every", time.Minute,
		"how often the sweep looks at a running stage (completion, speculative copies); at least 1s and no more than an hour")
	ownerLimits := flag.String("owner-max-concurrency", os.Getenv(lambdaenv.EnvOwnerMaxConcurrency),
		"owners' concurrency limits: owner=limit entries, * for every other owner (e.g. '*=20,alice=5'); default $"+lambdaenv.EnvOwnerMaxConcurrency)
	inputBuckets := flag.String("input-buckets", os.Getenv(lambdaenv.EnvInputBuckets),
		"buckets besides the data bucket that specs may read inputs from, comma-separated; default $"+lambdaenv.EnvInputBuckets+" (none: each owner's inputs and outputs areas only)")
	outputBuckets := flag.String("output-buckets", os.Getenv(lambdaenv.EnvOutputBuckets),
		"buckets besides the data bucket that jobs may publish outputs to (under each owner's key), comma-separated; default $"+lambdaenv.EnvOutputBuckets+" (none: each owner's outputs area only)")
	execDir := flag.String("exec-dir", os.Getenv(execstage.EnvExecDir),
		"directory of the programs that exec stages may run, by bare name (published at start; submit refuses any other); default $"+execstage.EnvExecDir+" (none: exec stages are refused)")
	logFile := flag.String("log-file", "",
		"also write the JSON log lines to this file, from which GET /jobs/{id}/logs (batchwork logs) reads a job's lines; separate executor processes (-slots 0) may append theirs to it; default a new batchwork-local-*.log in the temporary directory")
	flag.Parse()
	if *execDir != "" {
		// The executor joins a program's name to it: make it absolute, and
		// fail now rather than at the first exec task.
		abs, err := filepath.Abs(*execDir)
		if fi, serr := os.Stat(abs); err != nil || serr != nil || !fi.IsDir() {
			fmt.Fprintf(os.Stderr, "-exec-dir %s: not a directory\n", *execDir)
			os.Exit(2)
		}
		*execDir = abs
	}
	limits, err := control.ParseOwnerLimits(*ownerLimits)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-owner-max-concurrency:", err)
		os.Exit(2)
	}
	buckets, err := control.ParseInputBuckets(*inputBuckets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-input-buckets:", err)
		os.Exit(2)
	}
	outBuckets, err := control.ParseInputBuckets(*outputBuckets)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-output-buckets:", err)
		os.Exit(2)
	}
	if *checkEvery < time.Second || *checkEvery > time.Hour {
		fmt.Fprintf(os.Stderr, "-check-every %s: want between 1s and 1h\n", *checkEvery)
		os.Exit(2)
	}
	if *slots < 0 {
		fmt.Fprintf(os.Stderr, "-slots %d: want 0 (control plane only) or more\n", *slots)
		os.Exit(2)
	}
	var tokenDir string
	if *tokenFile == "" {
		if tokenDir, err = localauth.DefaultDir(os.Getenv); err != nil {
			fmt.Fprintln(os.Stderr, "-token-file:", err)
			os.Exit(2)
		}
	}
	logOut, logPath, err := openLogFile(*logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "-log-file:", err)
		os.Exit(2)
	}
	defer logOut.Close()
	log, err := lambdaenv.NewLogger(io.MultiWriter(os.Stderr, logOut))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := awsconf.Load(ctx, *endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	inj, err := faultenv.FromEnv() // BATCHWORK_FAULTS, for chaos runs (built with -tags faults)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	inj.Install(&cfg)
	// Faults are for the running system: creating the resources is setup,
	// and some of its steps do not survive a lost response (a retried
	// UpdateTimeToLive fails "TimeToLive is already enabled").
	inj.SetEnabled(false)
	// Spans where the OTEL_* variables say, none by default (shared/tracing).
	shutdownTracing, err := tracing.Setup(ctx, os.Getenv, "batchwork-local", func(err error) { log.Warn("export spans", "err", err) })
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer shutdownTracing(context.WithoutCancel(ctx))
	reg := batchwork.NewRegistry()
	wordcount.Register(reg)
	diamond.Register(reg, nil)
	join.Register(reg)
	r, err := runner.New(ctx, runner.Options{AWS: cfg, Prefix: *prefix, Listen: *listen, Slots: *slots, ControlOnly: *slots == 0, SweepEvery: *sweep, Registry: reg, Log: log,
		TokenFile: *tokenFile, TokenDir: tokenDir, ExecDir: *execDir, LogFile: logPath,
		// Submits naming a task no executor runs are refused: the runner
		// publishes its slots' task names before it serves. A control-only
		// runner (-slots 0) does not check, since a submit could race the
		// start of the separate executors that publish theirs.
		Control: control.Config{OwnerLimits: limits, InputBuckets: buckets, OutputBuckets: outBuckets, CheckTaskNames: *slots > 0, CheckEvery: *checkEvery}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	inj.SetEnabled(true)
	q := r.Resources.Queues
	// Separate executor processes (-slots 0) are configured from this line.
	// The token itself is never logged: only its file, which only this
	// user can read.
	log.Info("batchwork running", "api", r.URL, "token_file", r.TokenFile, "log_file", logPath, "table", r.Resources.Table, "bucket", r.Resources.Bucket,
		"queue_high", q.High, "queue_normal", q.Normal, "queue_low", q.Low, "dlq", q.DLQ, "queue_timer", q.Timer)
	go inj.ReportEvery(ctx, time.Second, func(c map[string]int) { log.Info("faults injected", "counts", c) })
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// openLogFile opens the -log-file for appending (lines of earlier runs
// stay; each job's are found by its id), or creates one.
func openLogFile(path string) (*os.File, string, error) {
	if path == "" {
		f, err := os.CreateTemp("", "batchwork-local-*.log")
		if err != nil {
			return nil, "", err
		}
		return f, f.Name(), nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, "", err
	}
	f, err := os.OpenFile(abs, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, "", err
	}
	return f, abs, nil
}
