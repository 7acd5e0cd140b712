// Command chaos proves Batchwork's failure guarantees under faults: on the
// local emulator it runs a mix of jobs (word count, the diamond and the
// join DAG, and workloads of tolerated failures, bad records,
// speculation (with the sweep's stage looks every -check-every, so that
// copies launch), checkpoints, a deadline, deletion, redrive, a rerun
// from a middle stage of a succeeded job, and dynamic splitting (with
// the executors' split trigger at -split-after): cmd/chaos/chaostasks)
// twice on separate deployments, once fault-free, and once with every
// process injecting AWS faults (throttles, 500/503s, transaction
// conflicts on transactions and single-item writes,
// TransactionInProgress, lost responses, SQS messages delivered to two
// executors at once), an executor process SIGKILLed and replaced about
// once a second, and a few jobs cancelled mid-run. Then an independent
// checker (package check), which reads only the table, the bucket and
// the executors' reports of their claims and commits, verifies that
// every job ended as it should, that each task committed exactly once
// (by the commits reported as they happened, which a second commit
// cannot overwrite) and every counter adds up, that of a speculative
// copy and its holder at most one committed, that manifests list only
// committed attempts, and that every output is byte-identical to the
// fault-free run's (and a checkpointing task's skips and repeats no
// record); that a rerun reuses only the stages it does not run, with no
// task of its own and its source's committed outputs in its manifests
// (its outputs compared through its source's fault-free twin); and that
// a dynamically split stage's tasks tile each input object exactly once,
// its outputs holding the input's lines once each, as the fault-free
// run's do. It prints a table (jobs, kills, faults by kind, wall
// times, the time a killed executor's tasks took to be claimed again)
// and exits 1 on any violation.
//
//	go run ./cmd/chaos            # 100 jobs (make chaos)
//	go run ./cmd/chaos -small     # 10 jobs
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// defaultOptions are make chaos's.
func defaultOptions() Options {
	return Options{
		Jobs: 100, Executors: 4, Slots: 4, KillEvery: time.Second, Faults: "chaos",
		Lease: 6 * time.Second, MaxAttempts: 8, Timeout: 10 * time.Minute, Seed: time.Now().UnixNano() % 1_000_000,
		CancelFraction: 0.05, Sweep: time.Second, CheckEvery: 2 * time.Second, SplitAfter: time.Second,
	}
}

func main() {
	o := defaultOptions()
	flag.IntVar(&o.Jobs, "jobs", o.Jobs, "jobs per run")
	small := flag.Bool("small", false, "10 jobs (the size make test runs)")
	flag.IntVar(&o.Executors, "executors", o.Executors, "executor processes")
	flag.IntVar(&o.Slots, "slots", o.Slots, "slots per executor process (BATCHWORK_SLOTS)")
	flag.DurationVar(&o.KillEvery, "kill-every", o.KillEvery, "SIGKILL a random executor this often (0: never)")
	flag.StringVar(&o.Faults, "faults", o.Faults, `BATCHWORK_FAULTS of every process in the chaos run ("chaos": throttles, 5xx, transaction conflicts on transactions and single-item writes, TransactionInProgress, lost responses, SQS messages delivered twice at once (internal/faults.Chaos); "off": none)`)
	flag.DurationVar(&o.Lease, "lease", o.Lease, "task lease in every spec")
	flag.IntVar(&o.MaxAttempts, "max-attempts", o.MaxAttempts, "retry.maxAttempts in every spec (0: the examples' own, 3); see docs/chaos.md on why not 3")
	flag.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long each run's jobs may take to end; a job still running then is stuck")
	flag.Int64Var(&o.Seed, "seed", o.Seed, "seed of the kills, cancels and every process's faults")
	flag.Float64Var(&o.CancelFraction, "cancel", o.CancelFraction, "fraction of the jobs cancelled mid-run")
	flag.DurationVar(&o.Sweep, "sweep", o.Sweep, "control plane sweep interval")
	flag.DurationVar(&o.CheckEvery, "check-every", o.CheckEvery, "how often the sweep looks at a running stage, launching speculative copies (batchwork-local -check-every; deployed: a minute)")
	flag.DurationVar(&o.SplitAfter, "split-after", o.SplitAfter, "how long an input task of a dynamicSplit stage runs before its executor offers to split it (BATCHWORK_SPLIT_AFTER, 100ms to 1h; deployed: a minute)")
	flag.StringVar(&o.LogDir, "logs", "", "directory for the processes' logs (default: a new temporary directory)")
	flag.Parse()
	if *small {
		o.Jobs = 10
	}
	if o.Jobs < 1 || o.Executors < 1 || o.Slots < 1 {
		fmt.Fprintln(os.Stderr, "chaos: -jobs, -executors and -slots must be positive")
		os.Exit(2)
	}
	if o.SplitAfter != 0 && (o.SplitAfter < 100*time.Millisecond || o.SplitAfter > time.Hour) {
		fmt.Fprintf(os.Stderr, "chaos: -split-after %s: want 0 (the executors' default) or 100ms to 1h\n", o.SplitAfter)
		os.Exit(2)
	}
	if o.LogDir == "" {
		dir, err := os.MkdirTemp("", "batchwork-chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "chaos:", err)
			os.Exit(1)
		}
		o.LogDir = dir
	}
	o.Progress = os.Stderr
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		fmt.Fprintln(os.Stderr, "chaos: logs in", filepath.Join(o.LogDir, "chaos.log"))
		os.Exit(1)
	}
	rep.Print(os.Stdout)
	fmt.Printf("logs: %s\n", filepath.Join(o.LogDir, "chaos.log"))
	if len(rep.Violations) > 0 {
		os.Exit(1)
	}
}
