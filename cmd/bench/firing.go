package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/batchwork/batchwork/shared/control"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/schedule"
)

// firingAccuracy measures on-time firing: n schedules due at the same
// instant T (a whole minute), or with spread > 0 spread over the seconds
// from T, handed off by one sweep step to the timer queue and fired by
// the local runner's timer consumer (batches of 10 handled concurrently,
// as concurrent Lambda invocations of the sweep would). It prints how
// late each job was created after its scheduled time, and where the time
// went.
//
// The clock is injected and maps to real time at a fixed offset: the
// schedules are set up (created, and their index entries moved to their
// minute's bucket by the sweep's FireDue) on a clock half an hour before
// T, then the clock jumps to 25 s before T and runs at real speed from
// there, so the SQS delays and the measurement are real time. It uses its
// own installation (table, queues), so the task bench's table does not
// slow the emulator.
func firingAccuracy(ctx context.Context, cfg aws.Config, n int, spread time.Duration) error {
	var counter awsconf.Counter
	counted := cfg.Copy()
	counter.Install(&counted)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().UTC().Add(time.Duration(offset.Load())) }
	var writes jobWrites
	writes.install(&counted, clock)
	r, err := runner.New(ctx, runner.Options{
		AWS: counted, Prefix: fmt.Sprintf("bench-fire-%d", time.Now().Unix()), Registry: batchwork.NewRegistry(),
		Log: slog.New(slog.NewJSONHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	svc := r.Service
	svc.Now = clock
	at := time.Now().UTC().Add(30 * time.Minute).Truncate(time.Minute)

	setup := time.Now()
	ids, err := createBurst(ctx, svc, n, at, spread)
	if err != nil {
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

	// 25 s before T the sweep's 90 s handoff window covers a minute's
	// spread.
	offset.Store(int64(at.Add(-25 * time.Second).Sub(time.Now().UTC())))
	handStart := time.Now()
	sent, err := svc.HandOffTimers(ctx, svc.Now())
	if err != nil {
		return err
	}
	handTook := time.Since(handStart)
	if sent != n {
		return fmt.Errorf("handed off %d firings, want %d", sent, n)
	}

	opsBefore, totalBefore := counter.Snapshot()
	// For each firing: when its message reached a consumer and when its
	// handling ended (job created, first stage's tasks queued, run and
	// cursor recorded), as offsets from T on the injected clock.
	var mu sync.Mutex
	received := map[string]time.Duration{}
	handled := map[string]time.Duration{}
	failed := 0
	var firstErr error
	allDone := make(chan struct{})
	// scheduled is a timer message's scheduled time.
	scheduled := func(body string) time.Time {
		var m struct{ Firing string }
		_ = json.Unmarshal([]byte(body), &m)
		_, t, _ := schedule.ParseFiringKey(m.Firing)
		return t
	}
	r.OnTimer = func(body string, recv time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := received[body]; !ok {
			received[body] = recv.Add(time.Duration(offset.Load())).Sub(scheduled(body))
		}
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		if _, ok := handled[body]; !ok {
			handled[body] = svc.Now().Sub(scheduled(body))
			if len(handled) == n {
				close(allDone)
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { r.RunTimers(cctx); close(stopped) }()
	select {
	case <-allDone:
	case <-time.After(25*time.Second + spread + 5*time.Minute):
	}
	lastFired := svc.Now()
	cancel()
	<-stopped
	opsAfter, totalAfter := counter.Snapshot()
	mu.Lock()
	defer mu.Unlock()

	late := make([]time.Duration, 0, n)
	durable := make([]time.Duration, 0, n)
	var lmu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	// Bounded: DynamoDB Local has been seen to leave reads unanswered
	// after the burst; the figures then cover the runs read in time.
	readCtx, cancelReads := context.WithTimeout(ctx, 2*time.Minute)
	defer cancelReads()
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			l, err := svc.ScheduleRuns(readCtx, "bench", id, 1, "")
			if err != nil || len(l.Runs) == 0 || l.Runs[0].StartedAt == nil {
				return
			}
			lmu.Lock()
			late = append(late, l.Runs[0].StartedAt.Sub(l.Runs[0].Scheduled))
			writes.mu.Lock()
			if w, ok := writes.at[l.Runs[0].JobID]; ok {
				durable = append(durable, w.Sub(l.Runs[0].Scheduled))
			}
			writes.mu.Unlock()
			lmu.Unlock()
		}()
	}
	wg.Wait()
	due := "at the same instant"
	if spread > 0 {
		due = fmt.Sprintf("spread over %s", spread)
	}
	fmt.Printf("firing accuracy: %d schedules due %s, fired through the timer queue by the runner's consumer\n", n, due)
	fmt.Printf("  setup %.1fs (create + first sweep planning); handoff of %d delayed messages by one sweep step: %.1fs\n",
		setupTook.Seconds(), sent, handTook.Seconds())
	if len(late) == 0 {
		return fmt.Errorf("no firing recorded (handled %d, failed %d)", len(handled), failed)
	}
	fmt.Printf("  handled %d of %d timer messages (%d consumer errors, retried by SQS); last at T+%.1fs (T: the first time)\n",
		len(handled), n, failed, lastFired.Sub(at).Seconds())
	if firstErr != nil {
		fmt.Printf("  first consumer error: %v\n", firstErr)
	}
	pr := func(what string, ds []time.Duration) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		slices.Sort(ds)
		q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
		fmt.Printf("  %-44s min %8s  p50 %8s  p99 %8s  max %8s\n", what, ds[0].Round(time.Millisecond),
			q(0.50).Round(time.Millisecond), q(0.99).Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
		return q(0.99)
	}
	pr(fmt.Sprintf("scheduled to job's created time (%d runs):", len(late)), late)
	if p99 := pr("scheduled to job record written:", durable); len(durable) > 0 {
		verdict := "met"
		if p99 > firingTarget || len(durable) < n {
			verdict = "MISSED"
		}
		fmt.Printf("  job records written: p99 %.2fs for %d of %d firings, against the target p99 <= %s: %s\n",
			p99.Seconds(), len(durable), n, firingTarget, verdict)
	}
	pr("scheduled to message received (sent 5 s early):", slices.Collect(maps.Values(received)))
	early := 0
	for _, d := range received {
		if d <= 0 {
			early++
		}
	}
	fmt.Printf("  %d of %d messages were in a consumer by the scheduled time\n", early, len(received))
	pr("scheduled to firing handled (tasks queued):", slices.Collect(maps.Values(handled)))
	fmt.Printf("  AWS requests from handoff to the last firing: %.1f per firing:", float64(totalAfter-totalBefore)/float64(n))
	for _, k := range awsconf.Keys(opsAfter) {
		if d := opsAfter[k] - opsBefore[k]; d > 0 {
			fmt.Printf(" %s %.2f", k, float64(d)/float64(n))
		}
	}
	fmt.Println()
	if len(late) < n {
		// The rest are still queued (the emulator is the bottleneck); the
		// figure covers what fired within the bench's 5 minutes.
		fmt.Printf("  %d of %d firings had not created their job 5 minutes after T\n", n-len(late), n)
	}
	return nil
}

// firingTarget is issue 12's bound on the p99 of scheduled-to-job-record-
// written when 1,000 schedules are due in the same second.
const firingTarget = 2 * time.Second

// jobWrites records when each job's record was durably written: the end
// of the successful TransactWriteItems that put it (its item with sort key
// "JOB"). A job's own "created" time is taken just before that request,
// so under load it can be well ahead of the job existing; the bench
// reports both.
type jobWrites struct {
	mu  sync.Mutex
	at  map[string]time.Time // job id -> when its creating request returned
	now func() time.Time
	// scheduled is a firing's job's scheduled time, from the firing key
	// of the idempotency record written with it.
	scheduled map[string]time.Time
}

func (w *jobWrites) install(cfg *aws.Config, now func() time.Time) {
	w.at, w.scheduled, w.now = map[string]time.Time{}, map[string]time.Time{}, now
	ddbwire.Install(cfg, w) // jobwriteshook.go
	cfg.APIOptions = append(cfg.APIOptions, func(st *middleware.Stack) error {
		return st.Initialize.Add(middleware.InitializeMiddlewareFunc("bench.jobwrites",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				tx, ok := in.Parameters.(*dynamodb.TransactWriteItemsInput)
				if err != nil || !ok {
					return out, md, err
				}
				w.note(tx, now())
				return out, md, err
			}), middleware.After)
	})
}

// note records the job a creating transaction wrote, and a firing's
// scheduled time, as done at done.
func (w *jobWrites) note(tx *dynamodb.TransactWriteItemsInput, done time.Time) {
	job, sched := "", time.Time{}
	for _, it := range tx.TransactItems {
		if it.Put == nil {
			continue
		}
		pk, _ := it.Put.Item["pk"].(*ddbtypes.AttributeValueMemberS)
		sk, _ := it.Put.Item["sk"].(*ddbtypes.AttributeValueMemberS)
		switch {
		case pk == nil || sk == nil:
		case sk.Value == "JOB" && strings.HasPrefix(pk.Value, "JOB#"):
			job = strings.TrimPrefix(pk.Value, "JOB#")
		case sk.Value == "IDEM":
			// IDEM#<owner>#<key>: a key holds no '#'.
			_, t, err := schedule.ParseFiringKey(pk.Value[strings.LastIndexByte(pk.Value, '#')+1:])
			if err == nil {
				sched = t
			}
		}
	}
	if job == "" {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.at[job] = done
	if !sched.IsZero() {
		w.scheduled[job] = sched
	}
}

// createBurst creates n schedules of a one-task job, 8 at a time: schedule
// i is due at `at`, or with a spread at `at` plus its share of it in whole
// seconds (a start time has second precision). It returns their ids.
func createBurst(ctx context.Context, svc *control.Service, n int, at time.Time, spread time.Duration) ([]string, error) {
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		start := at.Add((spread * time.Duration(i) / time.Duration(n)).Truncate(time.Second))
		body := fmt.Sprintf(`{"name":"burst","expression":"rate(1 day)","start":%q,"overlap":"allow",
		  "spec":{"name":"fired","stages":[{"name":"s","task":"noop","partitions":{"count":1}}]}}`, start.Format(time.RFC3339))
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			v, err := svc.CreateSchedule(ctx, "bench", []byte(body))
			ids[i], errs[i] = v.ID, err
		})
	}
	wg.Wait()
	return ids, errors.Join(errs...)
}
