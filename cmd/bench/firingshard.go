package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/schedule"
)

var (
	shardSchedules = flag.Int("shard-schedules", 300, "schedules due at one instant for the sharded-firing figure (0: skip)")
	shardRunsFlag  = flag.String("shard-runs", "1,4", "concurrent shard runs the sharded-firing figure is measured with, comma-separated")
)

// runShardedFiring measures sharded firing once per run count, each on an
// emulator of its own.
func runShardedFiring() error {
	if *shardSchedules <= 0 || *shardRunsFlag == "" {
		return nil
	}
	for _, f := range strings.Split(*shardRunsFlag, ",") {
		runs, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || runs < 1 {
			return fmt.Errorf("-shard-runs: %q is not a positive count", f)
		}
		ctx := context.Background()
		emu, err := startEmulator(ctx)
		if err != nil {
			return err
		}
		err = shardedFiring(ctx, emu.AWSConfig(), *shardSchedules, runs)
		emu.Stop()
		if err != nil {
			return err
		}
	}
	return nil
}

// shardedFiring measures the sweep's own firing path, divided by shard:
// n schedules due at the same instant T, fired by `runs` concurrent shard
// runs (Firer.FireShard, each holding its shard's lease), as the timer
// queue's consumers run relayed shards when the timer path did not fire
// a burst. It prints the firings recorded per second and how late each
// job was created after T. The clock is injected as in firingAccuracy:
// setup half an hour before T, then real time from T.
func shardedFiring(ctx context.Context, cfg aws.Config, n, runs int) error {
	var counter awsconf.Counter
	counted := cfg.Copy()
	counter.Install(&counted)
	var labels reqLabels
	labels.install(&counted)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().UTC().Add(time.Duration(offset.Load())) }
	r, err := runner.New(ctx, runner.Options{
		AWS: counted, Prefix: fmt.Sprintf("bench-shard-%d", time.Now().Unix()), Registry: batchwork.NewRegistry(),
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	svc := r.Service
	svc.Now = clock
	at := time.Now().UTC().Add(30 * time.Minute).Truncate(time.Minute)
	setup := time.Now()
	ids, err := createBurst(ctx, svc, n, at, 0) // firing.go
	if err != nil {
		return err
	}
	for {
		c, err := svc.FireDue(ctx, svc.Now())
		if err != nil {
			return err
		}
		if c.Examined == 0 {
			break
		}
	}
	// The sweep would have run every minute until T: the shards'
	// watermarks are caught up to just before it (a run walks at most 30
	// minutes of index).
	for range 3 {
		if _, err := svc.FireDue(ctx, at.Add(-time.Second)); err != nil {
			return err
		}
	}
	setupTook := time.Since(setup)

	// From T on, runs take shards off a shared list; a run that relays its
	// shard (work left) puts it back, as its relay message would.
	offset.Store(int64(at.Sub(time.Now().UTC())))
	opsBefore, totalBefore := counter.Snapshot()
	labelsBefore := labels.snapshot()
	start := time.Now()
	shards := make(chan int, schedule.ShardCount)
	for sh := range schedule.ShardCount {
		shards <- sh
	}
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var pending atomic.Int64
	pending.Store(schedule.ShardCount)
	var started, relayed, leased atomic.Int64
	runErrs := make([]error, runs)
	for i := range runs {
		wg.Go(func() {
			for sh := range shards {
				c, err := svc.FireShard(ctx, sh, svc.Now())
				started.Add(int64(c.Started))
				leased.Add(int64(c.Leased))
				if err != nil && runErrs[i] == nil {
					runErrs[i] = err
				}
				if c.Relayed > 0 || c.Leased > 0 || err != nil {
					relayed.Add(1)
					shards <- sh
					continue
				}
				if pending.Add(-1) == 0 {
					close(shards)
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	opsAfter, totalAfter := counter.Snapshot()
	labelsAfter := labels.snapshot()

	late := make([]time.Duration, 0, n)
	var lmu sync.Mutex
	for _, id := range ids {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := svc.ScheduleRuns(ctx, "bench", id, 1, "")
			if err != nil || len(l.Runs) == 0 || l.Runs[0].StartedAt == nil {
				return
			}
			lmu.Lock()
			late = append(late, l.Runs[0].StartedAt.Sub(l.Runs[0].Scheduled))
			lmu.Unlock()
		})
	}
	wg.Wait()
	fmt.Printf("sharded firing: %d schedules due at one instant, fired by %d concurrent shard runs (the sweep's path, %d shards)\n",
		n, runs, schedule.ShardCount)
	fmt.Printf("  setup %.1fs; %d jobs created in %.1fs: %.0f firings recorded per second (%d shard runs put back: relayed or leased)\n",
		setupTook.Seconds(), started.Load(), took.Seconds(), float64(started.Load())/took.Seconds(), relayed.Load())
	if err := errors.Join(runErrs...); err != nil {
		fmt.Printf("  run errors (shards retried): %v\n", err)
	}
	if len(late) > 0 {
		slices.Sort(late)
		q := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
		fmt.Printf("  scheduled to job's created time (%d runs): p50 %s  p99 %s  max %s\n", len(late),
			q(0.5).Round(time.Millisecond), q(0.99).Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond))
	}
	fmt.Printf("  AWS requests per firing: %.1f:", float64(totalAfter-totalBefore)/float64(n))
	for _, k := range awsconf.Keys(opsAfter) {
		if d := opsAfter[k] - opsBefore[k]; d > 0 {
			fmt.Printf(" %s %.2f", k, float64(d)/float64(n))
		}
	}
	fmt.Println()
	labels.print(labelsBefore, labelsAfter, n)
	if len(late) < n {
		return fmt.Errorf("sharded firing: %d of %d firings recorded", len(late), n)
	}
	return nil
}
