// Command batchwork-executor is the long-running executor host the
// Fargate service runs (see the Dockerfile): executor slots fed by long
// polling the three ready queues, configured like the Lambda functions
// (shared/lambdaenv) plus BATCHWORK_SLOTS. On SIGTERM (a scale-in or a
// deployment) it stops receiving and lets running tasks finish and commit.
//
// Register your own task functions here, as in functions/executor.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/examples/join"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/tuning"
)

// EnvSlots is the number of concurrent tasks (default 4).
const EnvSlots = "BATCHWORK_SLOTS"

// drain stays under ECS's longest stop timeout (120 s) so that tasks
// that finish in time commit before the container is killed.
const drain = 110 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "batchwork-executor:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := lambdaenv.FromEnv()
	if err != nil {
		return err
	}
	slots := 4
	if s := os.Getenv(EnvSlots); s != "" {
		if slots, err = strconv.Atoi(s); err != nil || slots < 1 {
			return fmt.Errorf("%s=%q: want a positive whole number", EnvSlots, s)
		}
	}
	w, err := lambdaenv.Wire(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	reg := executor.NewRegistry()
	wordcount.Register(reg)
	diamond.Register(reg, nil)
	join.Register(reg)
	// A chaos run (BATCHWORK_FAULTS) sums every process's injected faults
	// from these lines; without faults nothing is logged.
	go faults.ReportEvery(ctx, w.Faults, time.Second, func(c map[string]int) { w.Log.Info("faults injected", "counts", c) })
	p := &executor.Poller{
		Runner: &executor.Runner{CP: w.Service, Blob: w.Blob, Registry: reg, Log: w.Log,
			// One line per attempt that starts: which executor ran what
			// is otherwise only in the task record, and only until the
			// next claim overwrites it.
			OnClaim: func(c control.Claim, _ time.Time) {
				w.Log.Info("task claimed", "job_id", c.Task.Ref.Job, "stage", c.Task.Ref.Stage,
					"partition", c.Task.Ref.Partition, "attempt", c.Task.Attempt, "claimed_at", c.Task.Updated.UnixMilli())
			}},
		Queue:      w.Queue,
		Queues:     []string{cfg.Queues.High, cfg.Queues.Normal, cfg.Queues.Low},
		Slots:      slots,
		Visibility: tuning.ReceiveVisibility,
		Drain:      drain,
		Log:        w.Log,
	}
	w.Log.Info("executor running", "slots", slots)
	return p.Run(ctx)
}
