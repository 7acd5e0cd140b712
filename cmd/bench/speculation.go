package main

import (
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
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
	e, err := newBenchEnv(ctx, runner.Options{
		Prefix: fmt.Sprintf("bench-spec-%d", time.Now().Unix()), Slots: b.tasks + b.tasks/b.stragglerEvery + 2, Registry: reg,
		SweepEvery: time.Second,
		Control:    control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 30 * time.Second},
	}, true) // timed, not counted
	if err != nil {
		return err
	}
	defer e.close()
	e.start(ctx)
	r, watcher := e.r, e.watcher

	stragglers := (b.tasks + b.stragglerEvery - 1) / b.stragglerEvery
	fmt.Printf("speculation: %d tasks of %s, %d of them %dx slower on their first attempt; sweep and stage checks every 1s\n",
		b.tasks, b.base, stragglers, b.slowdown)
	for _, on := range []bool{false, true} {
		spec := ""
		if on {
			spec = `,"speculation":{"quantile":0.75,"multiplier":1.5}`
		}
		body := fmt.Appendf(nil, `{"name":"straggle","lease":"5m","stages":[{"name":"s","task":"bench.straggle","partitions":{"count":%d}%s}]}`, b.tasks, spec)
		st, elapsed, err := runJob(ctx, r, watcher, fmt.Sprintf("straggle-%v", on), body, 10*time.Minute, 100*time.Millisecond)
		if err != nil {
			return err
		}
		name := "off"
		if on {
			name = "on "
		}
		fmt.Printf("  speculation %s: job %s in %.1fs\n", name, st.State, elapsed.Seconds())
	}
	return nil
}
