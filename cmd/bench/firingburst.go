package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/runner"
)

var burstSizesFlag = flag.String("firing-bursts", "25,50,100,200",
	"schedules due at one instant in each burst of the on-time ladder, comma-separated, smallest first (empty: skip)")

var firingInstant = flag.Bool("firing-instant", false,
	"also measure -schedules due at one instant through the timer queue (the ladder's bursts stand for it by default)")

// firingSpreads are the spreads the firing-accuracy figure is measured
// with: over a minute, and at one instant when asked.
func firingSpreads() []time.Duration {
	if *firingInstant {
		return []time.Duration{0, time.Minute}
	}
	return []time.Duration{time.Minute}
}

// burstGap separates the ladder's bursts: the follow-up work of one
// (its jobs' stages, runs and cursors, about 14 requests a firing after
// its job is written) is done before the next is due.
const burstGap = 12 * time.Second

// runFiringBursts measures the on-time ladder on an emulator of its own.
func runFiringBursts() error {
	if *burstSizesFlag == "" {
		return nil
	}
	var sizes []int
	for _, f := range strings.Split(*burstSizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("-firing-bursts: %q is not a positive count", f)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	ctx := context.Background()
	emu, err := startEmulator(ctx)
	if err != nil {
		return err
	}
	defer emu.Stop()
	m, err := firingBursts(ctx, emu.AWSConfig(), sizes)
	if err != nil || m.firings == 0 {
		return err
	}
	awsFiringModel(m).print()
	return nil
}

// keyUnits are a partition key's units per firing.
type keyUnits struct{ wcu, rcu float64 }

// burstFigure is one burst's outcome.
type burstFigure struct {
	n, written int
	p50, p99   time.Duration
}

func (b burstFigure) onTime() bool { return b.written == b.n && b.p99 <= firingTarget }

// firingMeasure is what one firing costs, measured over the ladder: the
// model of 100,000 firings a minute on AWS (firingmodel.go) scales it.
type firingMeasure struct {
	firings int
	// requests, write and read units per firing, from handoff to the
	// last firing handled (the timer messages' receives and deletes
	// included).
	requests, wcu, rcu float64
	// owner is the units per firing on each partition key named by the
	// owner (its schedules, SCH#, and its job index, OWN#): every
	// schedule of one owner lands there.
	owner map[string]keyUnits
	// indexWCU is the write units per firing on the schedule index's
	// bucket keys (SCHB#<minute>#<shard>).
	indexWCU float64
}

// firingBursts fires bursts of the given sizes, each due at one instant,
// through the timer queue as firingAccuracy does (one sweep step hands
// them all off, the runner's consumer fires them), the bursts burstGap
// apart, and prints for each the lateness of its job records
// (scheduled time to the job's transaction returning: the job exists),
// and the largest burst whose p99 is within the target.
func firingBursts(ctx context.Context, cfg aws.Config, sizes []int) (firingMeasure, error) {
	var counter awsconf.Counter
	counted := cfg.Copy()
	counter.Install(&counted)
	var labels reqLabels
	labels.install(&counted)
	rec := &loadmodel.Recorder{}
	rec.Install(&counted)
	var offset atomic.Int64
	clock := func() time.Time { return time.Now().UTC().Add(time.Duration(offset.Load())) }
	var writes jobWrites
	writes.install(&counted, clock)
	r, err := runner.New(ctx, runner.Options{
		AWS: counted, Prefix: fmt.Sprintf("bench-bursts-%d", time.Now().Unix()), Registry: batchwork.NewRegistry(), Log: discardLog(),
	})
	if err != nil {
		return firingMeasure{}, err
	}
	if err := rec.DescribeTable(ctx, dynamodb.NewFromConfig(cfg), r.Resources.Table); err != nil {
		return firingMeasure{}, err
	}
	svc := r.Service
	svc.Now = clock
	t0 := time.Now().UTC().Add(30 * time.Minute).Truncate(time.Minute)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * burstGap) }
	total := 0
	setup := time.Now()
	for i, n := range sizes {
		if _, err := createBurst(ctx, svc, n, at(i), 0); err != nil { // firing.go
			return firingMeasure{}, err
		}
		total += n
	}
	for {
		c, err := svc.FireDue(ctx, svc.Now())
		if err != nil {
			return firingMeasure{}, err
		}
		if c.Examined == 0 {
			break
		}
	}
	setupTook := time.Since(setup)

	// 10 s before the first burst one sweep step hands every burst off
	// (its 90 s window covers them).
	offset.Store(int64(t0.Add(-10 * time.Second).Sub(time.Now().UTC())))
	rec.Reset()
	opsBefore, totalBefore := counter.Snapshot()
	labelsBefore := labels.snapshot()
	sent, err := svc.HandOffTimers(ctx, svc.Now())
	if err != nil {
		return firingMeasure{}, err
	}
	if sent != total {
		return firingMeasure{}, fmt.Errorf("handed off %d firings, want %d", sent, total)
	}
	var mu sync.Mutex
	handled := map[string]bool{}
	failed := 0
	var firstErr error
	allDone := make(chan struct{})
	r.OnTimer = func(body string, _ time.Time, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		}
		if err == nil && !handled[body] {
			handled[body] = true
			if len(handled) == total {
				close(allDone)
			}
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { r.RunTimers(cctx); close(stopped) }()
	select {
	case <-allDone:
	case <-time.After(time.Until(at(len(sizes)-1).Add(-time.Duration(offset.Load()))) + time.Minute):
	}
	cancel()
	<-stopped
	opsAfter, totalAfter := counter.Snapshot()
	labelsAfter := labels.snapshot()
	snap := rec.Snapshot()

	writes.mu.Lock()
	late := make([][]time.Duration, len(sizes))
	for job, w := range writes.at {
		sched, ok := writes.scheduled[job]
		if !ok {
			continue
		}
		for i := range sizes {
			if sched.Equal(at(i)) {
				late[i] = append(late[i], w.Sub(sched))
			}
		}
	}
	writes.mu.Unlock()

	fmt.Printf("on-time firing bursts: %v schedules due at one instant, %s apart, fired through the timer queue by the runner's consumer\n",
		sizes, burstGap)
	fmt.Printf("  setup %.1fs; %d of %d firings handled (%d consumer errors, retried by SQS)\n", setupTook.Seconds(), len(handled), total, failed)
	if firstErr != nil {
		fmt.Printf("  first consumer error: %v\n", firstErr)
	}
	var best *burstFigure
	for i, n := range sizes {
		f := burstFigure{n: n, written: len(late[i])}
		if ds := late[i]; len(ds) > 0 {
			slices.Sort(ds)
			q := func(p float64) time.Duration { return ds[min(len(ds)-1, int(p*float64(len(ds))))] }
			f.p50, f.p99 = q(0.5), q(0.99)
		}
		verdict := "on time"
		if !f.onTime() {
			verdict = "LATE"
		}
		fmt.Printf("  %4d at one instant: %d job records written, scheduled to written p50 %s  p99 %s: %s\n",
			n, f.written, f.p50.Round(time.Millisecond), f.p99.Round(time.Millisecond), verdict)
		if f.onTime() {
			best = &f
		}
	}
	if best != nil {
		fmt.Printf("  largest on-time burst here: %d (p99 %.2f s, target %s)\n", best.n, best.p99.Seconds(), firingTarget)
	} else {
		fmt.Printf("  largest on-time burst here: none of %v (target p99 %s)\n", sizes, firingTarget)
	}

	m := firingMeasure{firings: len(handled), owner: map[string]keyUnits{}}
	if m.firings < total {
		// The requests and units are the whole run's: per firing only
		// when every firing's follow-up is done.
		fmt.Printf("  %d of %d firings handled a minute after the last burst: no cost per firing, no model\n", m.firings, total)
		return firingMeasure{}, nil
	}
	per := func(v float64) float64 { return v / float64(m.firings) }
	m.requests = per(float64(totalAfter - totalBefore))
	for _, op := range snap.Ops {
		m.wcu += per(op.WCU)
		m.rcu += per(op.RCU)
	}
	for k, st := range snap.Keys {
		if k.Service == "DynamoDB" && strings.HasPrefix(k.Key, "SCHB#") {
			m.indexWCU += per(st.WCU)
		}
		if k.Service != "DynamoDB" || !(strings.HasPrefix(k.Key, "SCH#") || strings.HasPrefix(k.Key, "OWN#")) {
			continue
		}
		name := k.Key[:strings.IndexByte(k.Key, '#')] + "#<owner>"
		u := m.owner[name]
		u.wcu, u.rcu = max(u.wcu, per(st.WCU)), max(u.rcu, per(st.RCU))
		m.owner[name] = u
	}
	fmt.Printf("  per firing: %.1f AWS requests, %.1f write and %.1f read units; on the owner's keys:", m.requests, m.wcu, m.rcu)
	for _, k := range slices.Sorted(maps.Keys(m.owner)) {
		fmt.Printf(" %s %.1f write, %.1f read;", k, m.owner[k].wcu, m.owner[k].rcu)
	}
	fmt.Println()
	fmt.Printf("  requests per firing, by operation:")
	for _, k := range awsconf.Keys(opsAfter) {
		if d := opsAfter[k] - opsBefore[k]; d > 0 {
			fmt.Printf(" %s %.2f", k, per(float64(d)))
		}
	}
	fmt.Println()
	fmt.Println("  requests per firing, by what they touch (JOB/STAGE: a job's stage item; JST: its state copies; SCH: the schedule; SCHB: the index; SCHR: its run record):")
	labels.print(labelsBefore, labelsAfter, m.firings)
	return m, nil
}
