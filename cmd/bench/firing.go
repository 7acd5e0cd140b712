package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/executor"
	"github.com/batchwork/batchwork/shared/runner"
)

// firingAccuracy measures on-time firing: n schedules all due at the same
// instant T (a whole minute), handed off by one sweep step to the timer
// queue and fired by `consumers` timer consumers (each receiving up to 10
// messages and firing them at once, as a Lambda invocation of the sweep
// does). It prints the spread between T and each job's creation.
//
// The clock is injected and maps to real time at a fixed offset: the
// schedules are set up (created, and their index entries moved to T's
// minute by the sweep's FireDue) on a clock half an hour before T, then
// the clock jumps to 40 s before T and runs at real speed from there, so
// the SQS delays and the measurement are real time. It uses its own
// installation (table, queues), so the task bench's table does not slow
// the emulator's transactions.
func firingAccuracy(ctx context.Context, cfg aws.Config, n, consumers int) error {
	r, err := runner.New(ctx, runner.Options{
		AWS: cfg, Prefix: fmt.Sprintf("bench-fire-%d", time.Now().Unix()), Registry: executor.NewRegistry(),
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	var offset atomic.Int64
	svc := r.Service
	svc.Now = func() time.Time { return time.Now().UTC().Add(time.Duration(offset.Load())) }
	at := time.Now().UTC().Add(30 * time.Minute).Truncate(time.Minute)

	setup := time.Now()
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	body := fmt.Sprintf(`{"name":"at-once","expression":"rate(1 day)","start":%q,"overlap":"allow",
	  "spec":{"name":"fired","stages":[{"name":"s","task":"noop","partitions":{"count":1}}]}}`, at.Format(time.RFC3339))
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			v, err := svc.CreateSchedule(ctx, "bench", []byte(body))
			ids[i], errs[i] = v.ID, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The sweep's firing step plans each new schedule and moves its index
	// entry to T's bucket (at most 500 a run).
	for {
		c, err := svc.FireDue(ctx, svc.Now())
		if err != nil {
			return err
		}
		if c.Examined == 0 {
			break
		}
		if c.Started > 0 {
			return fmt.Errorf("setup fired %d schedules early", c.Started)
		}
	}
	setupTook := time.Since(setup)

	offset.Store(int64(at.Add(-40 * time.Second).Sub(time.Now().UTC())))
	handStart := time.Now()
	sent, err := svc.HandOffTimers(ctx, svc.Now())
	if err != nil {
		return err
	}
	handTook := time.Since(handStart)
	if sent != n {
		return fmt.Errorf("handed off %d firings, want %d", sent, n)
	}

	url := r.Resources.Queues.Timer
	var fired atomic.Int64
	var failed atomic.Int64
	var firstErr atomic.Value
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cw sync.WaitGroup
	for range consumers {
		cw.Add(1)
		go func() {
			defer cw.Done()
			for cctx.Err() == nil {
				msgs, err := r.Queue.Receive(cctx, url, 10, 20*time.Second, time.Minute)
				if err != nil {
					continue
				}
				var done []string
				var mu sync.Mutex
				var bw sync.WaitGroup
				for _, m := range msgs {
					bw.Add(1)
					go func() {
						defer bw.Done()
						o, err := svc.FireTimer(cctx, m.Body)
						if err != nil {
							failed.Add(1)
							firstErr.CompareAndSwap(nil, err.Error())
							return
						}
						if o == control.TimerFired {
							fired.Add(1)
						}
						mu.Lock()
						done = append(done, m.Receipt)
						mu.Unlock()
					}()
				}
				bw.Wait()
				if len(done) > 0 {
					_ = r.Queue.DeleteBatch(cctx, url, done)
				}
			}
		}()
	}
	deadline := time.Now().Add(40*time.Second + 5*time.Minute)
	for fired.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	lastFired := svc.Now()
	cancel()
	cw.Wait()

	late := make([]time.Duration, 0, n)
	var lmu sync.Mutex
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := svc.ScheduleRuns(ctx, "bench", id, 1, "")
			if err != nil || len(l.Runs) == 0 || l.Runs[0].StartedAt == nil {
				return
			}
			lmu.Lock()
			late = append(late, l.Runs[0].StartedAt.Sub(l.Runs[0].Scheduled))
			lmu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("firing accuracy: %d schedules due at the same instant, %d timer consumers (10 messages each at once)\n", n, consumers)
	fmt.Printf("  setup %.1fs (create + first sweep planning); handoff of %d delayed messages by one sweep step: %.1fs\n",
		setupTook.Seconds(), sent, handTook.Seconds())
	if len(late) == 0 {
		return fmt.Errorf("no firing recorded (fired %d, failed %d)", fired.Load(), failed.Load())
	}
	slices.Sort(late)
	pct := func(p float64) time.Duration { return late[min(len(late)-1, int(p*float64(len(late))))] }
	fmt.Printf("  fired %d of %d via the timer queue (%d consumer errors, retried by SQS); last at T+%.1fs\n",
		fired.Load(), n, failed.Load(), lastFired.Sub(at).Seconds())
	if e := firstErr.Load(); e != nil {
		fmt.Printf("  first consumer error: %s\n", e)
	}
	fmt.Printf("  scheduled-to-job-created over %d recorded runs: min %s  p50 %s  p99 %s  max %s\n", len(late),
		late[0].Round(time.Millisecond), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), late[len(late)-1].Round(time.Millisecond))
	if len(late) < n {
		// The rest are still queued (the emulator is the bottleneck); the
		// figure covers what fired within the bench's 5 minutes.
		fmt.Printf("  %d of %d firings had not created their job 5 minutes after T\n", n-len(late), n)
	}
	return nil
}
