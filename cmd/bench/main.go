// Command bench measures Batchwork on the emulator:
//
//   - a job of 2,000 no-op tasks (a fan-out stage, then a fan-in task),
//     run -runs times, the run with the median rate reported (runs): its
//     sustained rate next to the emulator floor measured in the same run
//     (the mix probe's best level: emuprobe), the bench
//     process's CPU per task (-cpuprofile writes a pprof profile), AWS
//     requests and DynamoDB capacity per task by operation, the task item
//     size, and ready-to-claimed latency with idle executors;
//   - the same for a job of tasks that each write one object, and for
//     the map stage of word count with 64 reducers (S3 PUTs per map task);
//   - the cost per million tasks of each at list prices (prices.go);
//   - the load model (load.go, -load): a job of 100,000 no-op tasks, its
//     per-key DynamoDB capacity and per-prefix S3 rates scaled to 10,000
//     tasks a second against the per-partition and per-prefix limits, and
//     the time to the last task queued;
//   - the on-time firing ladder: bursts due at one instant through the
//     timer queue, the largest on time, and the model of 100,000 firings
//     a minute on AWS from their cost (firingburst.go, firingmodel.go);
//   - schedule firing accuracy through the timer queue (firing.go);
//   - sharded firing by concurrent shard runs (firingshard.go);
//   - the simulator (sim.go, internal/sim): its prediction of the
//     throughput and load jobs next to their measurement, and of a
//     million-task job on AWS at -rate (-sim prints only that);
//   - speculative execution: a job with stragglers 10x slower on their
//     first attempt, its wall time with speculation off and on
//     (speculation.go);
//   - the sort benchmark: 100-byte records sorted by a range shuffle and
//     validated, its time and its requests' cost per TB (sort.go).
//
// -tasks 0, -load 0, -firing-bursts "", -schedules 0, -shard-schedules 0,
// -speculation-tasks 0 and -sort-mb 0 skip the parts.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	"github.com/batchwork/batchwork/cmd/bench/runs"
	"github.com/batchwork/batchwork/cmd/bench/sweepshare"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/emulator/localstack"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	"github.com/batchwork/batchwork/shared/tuning"
)

func main() {
	tasks := flag.Int("tasks", 2000, "fan-out tasks of the throughput job (0: skip it and the cost workloads)")
	jobRuns := flag.Int("runs", 3, "runs of the throughput job; the one with the median rate is reported (cmd/bench/runs)")
	// 32 slots: at 16 the poller's batches of ten left slots idle between
	// receives (90% of the floor on a fast machine against 99% at 32, and
	// 0.95 requests a task against 0.72; docs/performance.md).
	slots := flag.Int("slots", 32, "executor slots")
	probes := flag.Int("probes", 100, "single-task jobs for the latency measurement")
	outputs := flag.Int("output-tasks", 2000, "tasks of the one-output job (each writes one object; 0: skip)")
	reducers := flag.Int("reducers", 64, "reducers of the word-count job (0: skip it)")
	maps := flag.Int("maps", 32, "map tasks of the word-count job")
	load := flag.Int("load", 100000, "no-op tasks of the load-model job (0: skip it)")
	loadSlots := flag.Int("load-slots", 32, "executor slots of the load-model job")
	rate := flag.Float64("rate", 10000, "task rate the load model scales to (tasks/s)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the throughput job (control plane and executors) to this file")
	lambdaMB := flag.Float64("lambda-mb", tuning.ExecutorMemoryMB, "Lambda executor memory for the compute cost (MB)")
	lambdaMS := flag.Float64("lambda-ms", 200, "billed duration of one executor invocation for the compute cost (ms)")
	// 1,000 schedules due in one minute, spread over its seconds (rates
	// anchored at their creation), and with -firing-instant all at its
	// first second (what cron schedules do). About 2 minutes each (see
	// docs/schedules.md).
	schedules := flag.Int("schedules", 1000, "schedules due in one minute for the firing-accuracy figure (0: skip)")
	// Speculation (speculation.go): stragglers 10x slower on their first
	// attempt, speculation off and on.
	specTasks := flag.Int("speculation-tasks", 24, "tasks of the speculation benchmark, every 8th a straggler (0: skip)")
	specBase := flag.Duration("speculation-task", 3*time.Second, "run time of a speculation benchmark task")
	simOnly := flag.Bool("sim", false, "print only the simulator's AWS prediction, from the documented profile (runs no emulator)")
	probeOnly := flag.Int("probe", 0, "print only the emulator's ceilings, probed this many times on one emulator (probe.go)")
	flag.Parse()
	if *probeOnly > 0 {
		if err := probeRepeated(*probeOnly, *slots); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *simOnly {
		simAWS(*rate, documentedProfile, "the documented load-model profile")
		return
	}
	lm := lambdaModel{mb: *lambdaMB, ms: *lambdaMS, batch: tuning.ExecutorBatchSize}
	if *tasks > 0 {
		o := benchOptions{tasks: *tasks, runs: *jobRuns, slots: *slots, probes: *probes, outputs: *outputs, reducers: *reducers, maps: *maps,
			cpuProfile: *cpuProfile, lm: lm, rate: *rate}
		if err := run(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if *load > 0 {
		if err := runLoad(*load, *loadSlots, *rate, lm); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	simAWSMeasured(*rate)
	if *specTasks > 0 {
		if err := runSpeculation(speculationBench{tasks: *specTasks, stragglerEvery: 8, base: *specBase, slowdown: 10}); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if err := runFiringBursts(); err != nil { // its flags are in firingburst.go
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *schedules > 0 {
		for _, spread := range firingSpreads() { // firingburst.go
			if err := runFiring(*schedules, spread); err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(1)
			}
		}
	}
	if err := runShardedFiring(); err != nil { // its flags are in firingshard.go
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	if *skewMB > 0 { // its flags are in skew.go
		if err := runSkew(*skewMB, *skewSplit, *skewReducers, min(*slots, 8)); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
	if *sortMB > 0 { // its flags are in sort.go
		if err := runSort(sortBench{mb: *sortMB, split: *sortSplit, reducers: *sortReducers, slots: min(*slots, 8)}); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
	}
}

type benchOptions struct {
	tasks, slots, probes, outputs, reducers, maps int
	runs                                          int
	cpuProfile                                    string
	lm                                            lambdaModel
	rate                                          float64
}

// runFiring measures firing accuracy on an emulator of its own.
func runFiring(schedules int, spread time.Duration) error {
	ctx := context.Background()
	emu, err := startEmulator(ctx)
	if err != nil {
		return err
	}
	defer emu.Stop()
	return firingAccuracy(ctx, emu.AWSConfig(), schedules, spread)
}

// startEmulator starts the bench's emulator and says which DynamoDB it
// measures (DynamoDB Local, or moto's with BATCHWORK_DYNAMODB=moto).
func startEmulator(ctx context.Context) (*emulator.Emulator, error) {
	// UntrackTables only matters when moto serves DynamoDB.
	emu, err := emulator.StartWith(ctx, emulator.Options{UntrackTables: true, DynamoPeak: true, Localstack: localstack.Start})
	if err != nil {
		return nil, err
	}
	fmt.Printf("emulator: %s, DynamoDB: %s\n", emu.Kind, emu.Dynamo)
	return emu, nil
}

func run(o benchOptions) error {
	tasks, slots, probes := o.tasks, o.slots, o.probes
	ctx := context.Background()
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(ctx context.Context, t *batchwork.Task) error { return nil })
	reg.Register("bench.one-output", func(ctx context.Context, t *batchwork.Task) error {
		_, err := t.Out.Write([]byte("one\n"))
		return err
	})
	wordcount.Register(reg)
	e, err := newBenchEnv(ctx, runner.Options{
		Prefix: fmt.Sprintf("bench-%d", time.Now().Unix()), Slots: slots, Registry: reg, SweepEvery: time.Minute,
		// The executors' batched counts, as deployed (internal/host).
		Control: control.Config{CountLinger: tuning.CountLinger},
	}, false)
	if err != nil {
		return err
	}
	defer e.close()
	cfg, rec, r, watcher := e.cfg, e.rec, e.r, e.watcher
	var mu sync.Mutex
	var latencies []time.Duration
	var measuring atomic.Bool
	var timeline runs.Timeline // the throughput job's claims
	r.Executor.OnClaim = func(c control.Claim, sent time.Time) {
		timeline.Claimed()
		if measuring.Load() {
			mu.Lock()
			latencies = append(latencies, time.Since(sent))
			mu.Unlock()
		}
	}
	e.start(ctx)

	probe := emuprobe.Run(ctx, cfg, emuprobe.Target{Table: r.Resources.Table, Bucket: r.Resources.Bucket, Slots: slots})
	txEmpty, upEmpty := emuprobe.WriteCost(ctx, cfg, r.Resources.Table, 20)

	// Ready-to-claimed latency with idle executors, one task at a time, on
	// a small table: measured first, so the emulator's cost of the big
	// job's 2,000 task records (its transactions copy the whole table) is
	// not in it.
	measuring.Store(true)
	for i := 0; i < probes; i++ {
		res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: fmt.Sprintf("probe-%d", i),
			Spec: []byte(`{"name":"probe","stages":[{"name":"s","task":"noop","partitions":{"count":1}}]}`)})
		if err != nil {
			return err
		}
		if _, err := wait(ctx, watcher, res.JobID, time.Minute); err != nil {
			return err
		}
	}
	measuring.Store(false)

	// Throughput and requests per task.
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	body := fmt.Appendf(nil, `{"name":"bench","stages":[
	  {"name":"fanout","task":"noop","partitions":{"count":%d}},
	  {"name":"fanin","task":"noop","after":["fanout"],"partitions":{"count":1}}]}`, tasks)
	total := tasks + 1
	type measured struct {
		run       runs.Run
		st        control.JobStatus
		ran, snap loadmodel.Snapshot
		spanned   string
		left      float64
	}
	var done []measured
	// The recorder's DynamoDB accounting out of the CPU window (loadmodel/defer.go).
	rec.Defer(true)
	for i := range max(o.runs, 1) { // runs.go says why several
		rec.Reset()
		span := emuprobe.StartSpan()
		cpu0 := emuprobe.CPUTime() // after the span's scan of /proc: no job's CPU
		timeline.Start()
		// The status is read once a second (a read of it costs DynamoDB
		// Local 6 to 10 ms of CPU, a share of the job's emulator CPU at 4
		// a second), and the job's own end time marks the end of the run.
		st, elapsed, err := runJob(ctx, r, watcher, fmt.Sprintf("bench-%d", i+1), body, 20*time.Minute, time.Second)
		if err != nil {
			return err
		}
		cpu := emuprobe.CPUTime() - cpu0
		spanned, left := span.Describe(total)
		claims := timeline.Take()
		// The job's own cost figure is final when it ends; the settling
		// sweep's scans below are no job's.
		ran := rec.Snapshot()
		if err := settle(ctx, r); err != nil {
			return err
		}
		snap := rec.Snapshot()
		done = append(done, measured{run: runs.Run{Tasks: total, Elapsed: elapsed, CPU: cpu, Requests: sweepshare.Of(snap, elapsed, tuning.SweepRate).Charged(), Claims: claims},
			st: st, ran: ran, snap: snap, spanned: spanned, left: left})
	}
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	rec.Defer(false)
	probe = probe.Around(emuprobe.Run(ctx, cfg, emuprobe.Target{Table: r.Resources.Table, Bucket: r.Resources.Bucket, Slots: slots}))
	all := make([]runs.Run, len(done))
	for i, m := range done {
		all[i] = m.run
	}
	pick := runs.Median(all)
	m := done[pick]
	st, elapsed, cpu, ran, snap, spanned, left := m.st, m.run.Elapsed, m.run.CPU, m.ran, m.snap, m.spanned, m.left
	rate := m.run.Rate()
	sustained, _ := m.run.Sustained()
	fmt.Printf("job of %d no-op tasks: %s in %.1fs\n", total, st.State, elapsed.Seconds())
	fmt.Printf("  end-to-end: %.0f tasks/s with %d slots; sustained (the claims between the first and last tenth): %.0f tasks/s\n", rate, slots, sustained)
	fmt.Printf("  %d runs: %s\n", len(all), runs.Describe(all, pick))
	printFloor(rate, sustained, probe, snap, total, cpu/time.Duration(total))
	simEmulator("throughput job", []int{tasks, 1}, snap, probe, slots, cpu/time.Duration(total), elapsed, 0, 0, left)
	fmt.Printf("    %s\n", spanned)
	fmt.Printf("  bench process CPU (control plane, executors; not the emulators, nor the recorder's DynamoDB accounting, done after the job): %.0f µs per task",
		float64(cpu.Microseconds())/float64(total))
	if o.cpuProfile != "" {
		fmt.Printf(" (profile: %s)", o.cpuProfile)
	}
	fmt.Println()
	fmt.Println(cpuVerdict(cpu, total, probe.Mix.All.OwnCPU)) // cpu.go
	// Sweep and polling requests are included: they are part of the cost.
	printRequests(snap, total, "task")
	printRequestsVerdict(snap, total, elapsed)
	if err := checkJobCost(ctx, watcher, st.ID, ran); err != nil { // jobcost.go
		return err
	}
	costs := []costRow{{name: "no-op task (no output)", c: costOf(snap, total, o.lm), target: 2}}
	if *traced { // tracing.go
		off := perTask{requests: float64(requestsOf(ran)) / float64(total), cpuMicros: float64(cpu.Microseconds()) / float64(total), elapsed: elapsed}
		if err := tracingOverhead(ctx, r, watcher, rec, tasks, off); err != nil {
			return err
		}
	}
	// moto snapshots the whole table for each item of a TransactWriteItems
	// (to roll back on failure), so its transactions slow down as the table
	// grows, unlike DynamoDB's. Show it, measured here, so the rate above is
	// read against the emulator's own cost.
	items, _ := emuprobe.CountItems(ctx, cfg, r.Resources.Table)
	txFull, upFull := emuprobe.WriteCost(ctx, cfg, r.Resources.Table, 20)
	fmt.Printf("  emulator write cost: 2-item TransactWriteItems %.1f ms with an empty table, %.1f ms with %d items; UpdateItem %.1f ms, %.1f ms\n",
		ms(txEmpty), ms(txFull), items, ms(upEmpty), ms(upFull))
	sample := domain.Task{Ref: domain.TaskRef{Job: "j1a1fd8fa5144ffa078bd8", Stage: 63, Partition: 99999}, MaxAttempts: spec.MaxAttemptsLimit,
		Input: &split.Split{Key: string(make([]byte, control.MaxInputKey)), Start: 1 << 40, End: 1 << 40}}
	fmt.Printf("  task item size: %d bytes max (with a %d-byte input key and a %d-byte error); %d bytes without input\n",
		dynamo.TaskItemSize(sample, control.MaxErrorLen+3), control.MaxInputKey, control.MaxErrorLen, dynamo.TaskItemSize(domain.Task{Ref: sample.Ref, MaxAttempts: 3}, 0))

	if o.outputs > 0 {
		c, err := oneOutput(ctx, r, watcher, rec, o.outputs, o.rate, o.lm)
		if err != nil {
			return err
		}
		costs = append(costs, c)
	}
	if o.reducers > 0 {
		c, err := wordCount(ctx, r, watcher, rec, o.maps, o.reducers, o.lm)
		if err != nil {
			return err
		}
		costs = append(costs, c)
	}
	printCosts(costs, o.lm)

	mu.Lock()
	defer mu.Unlock()
	if len(latencies) == 0 {
		return nil // -probes 0
	}
	slices.Sort(latencies)
	pct := func(p float64) time.Duration { return latencies[min(len(latencies)-1, int(p*float64(len(latencies))))] }
	fmt.Printf("  ready-to-claimed latency, idle executors (%d probes; SQS timestamps have 1 ms resolution): p50 %s  p99 %s\n",
		len(latencies), pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond))
	return nil
}

func wait(ctx context.Context, svc *control.Service, id string, within time.Duration) (control.JobStatus, error) {
	return waitEvery(ctx, svc, id, within, 20*time.Millisecond)
}

// waitEvery waits for a job to end, reading its status every poll.
func waitEvery(ctx context.Context, svc *control.Service, id string, within, poll time.Duration) (control.JobStatus, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := svc.Status(ctx, "bench", id)
		if err != nil {
			return st, err
		}
		if st.State != "RUNNING" {
			return st, nil
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("job %s still running after %s", id, within)
		}
		time.Sleep(poll)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
