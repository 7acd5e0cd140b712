package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/runner"
)

// The speculation benchmark (issue 13.5): a job of tasks that each take
// base, of which every stragglerEvery-th is 10x slower on its first
// attempt only, runs with speculation off and on; the job's wall time is
// printed for each. Speculative copies are attempt 2, so they run at the
// normal speed, as a straggler on a bad host would on a good one.
//
// The sweep launches copies in its look at a running stage, every
// CheckEvery (a minute when deployed, with a sweep every minute). The
// bench runs both at one second and scales the tasks to match: what
// matters is the tasks' length against the sweep's period.

// speculationBench is the benchmark's shape.
type speculationBench struct {
	tasks, stragglerEvery int
	base                  time.Duration
	slowdown              int
}

func runSpeculation(b speculationBench) error {
	ctx := context.Background()
	emu, err := startEmulator(ctx)
	if err != nil {
		return err
	}
	defer emu.Stop()
	cfg := emu.AWSConfig()
	reg := batchwork.NewRegistry()
	reg.Register("bench.straggle", func(ctx context.Context, t *batchwork.Task) error {
		d := b.base
		if t.Partition%b.stragglerEvery == 0 && t.Attempt == 1 {
			d *= time.Duration(b.slowdown)
		}
		select {
		case <-time.After(d):
		case <-ctx.Done(): // the other claim committed first
			return ctx.Err()
		}
		_, err := fmt.Fprintf(t.Out, "partition %d attempt %d\n", t.Partition, t.Attempt)
		return err
	})
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Prefix: fmt.Sprintf("bench-spec-%d", time.Now().Unix()), Slots: b.tasks + b.tasks/b.stragglerEvery + 2, Registry: reg,
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)), SweepEvery: time.Second,
		Control: control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 30 * time.Second},
	})
	if err != nil {
		return err
	}
	watcher := control.New(control.Config{Queues: r.Resources.Queues},
		dynamo.New(dynamodb.NewFromConfig(cfg), r.Resources.Table), nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(runCtx) }()
	defer func() { cancel(); <-done }()

	stragglers := (b.tasks + b.stragglerEvery - 1) / b.stragglerEvery
	fmt.Printf("speculation: %d tasks of %s, %d of them %dx slower on their first attempt; sweep and stage checks every 1s\n",
		b.tasks, b.base, stragglers, b.slowdown)
	for _, on := range []bool{false, true} {
		spec := ""
		if on {
			spec = `,"speculation":{"quantile":0.75,"multiplier":1.5}`
		}
		body := fmt.Appendf(nil, `{"name":"straggle","lease":"5m","stages":[{"name":"s","task":"bench.straggle","partitions":{"count":%d}%s}]}`, b.tasks, spec)
		start := time.Now()
		res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: fmt.Sprintf("straggle-%v", on), Spec: body})
		if err != nil {
			return err
		}
		st, err := waitEvery(ctx, watcher, res.JobID, 10*time.Minute, 100*time.Millisecond)
		if err != nil {
			return err
		}
		elapsed := time.Since(start)
		if st.Ended != nil {
			elapsed = st.Ended.Sub(start)
		}
		name := "off"
		if on {
			name = "on "
		}
		fmt.Printf("  speculation %s: job %s in %.1fs\n", name, st.State, elapsed.Seconds())
	}
	return nil
}
