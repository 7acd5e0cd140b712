package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	listprices "github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tuning"
)

// The limits the load table compares with: DynamoDB's per-partition
// throughput and S3's per-prefix request rates.
const (
	partitionWCU = 1000
	partitionRCU = 3000
	prefixPUTs   = 3500
	prefixGETs   = 5500
)

// lambdaModel is the compute the cost table states: executor invocations
// of tuning.ExecutorBatchSize tasks, each billed mb for ms.
type lambdaModel struct {
	mb, ms float64
	batch  int
}

// printRequests prints requests per task by operation, with the billed
// capacity of each DynamoDB operation.
func printRequests(snap loadmodel.Snapshot, tasks int, what string) {
	tot := snap.Totals()
	all := 0
	for _, n := range tot.Requests {
		all += n
	}
	fmt.Printf("  AWS requests per %s: %.2f (%d requests; DynamoDB %.2f, SQS %.2f, S3 %.2f)\n", what, per(all, tasks), all,
		per(tot.Requests["DynamoDB"], tasks), per(tot.Requests["SQS"], tasks), per(tot.Requests["S3"], tasks))
	names := make([]string, 0, len(snap.Ops))
	for k := range snap.Ops {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		op := snap.Ops[k]
		line := fmt.Sprintf("    %-34s %8d  %6.3f/%s", k, op.Requests, per(op.Requests, tasks), what)
		if op.RCU+op.WCU > 0 {
			line += fmt.Sprintf("   %6.2f RRU %6.2f WRU /%s", op.RCU/float64(tasks), op.WCU/float64(tasks), what)
		}
		if op.Errors > 0 {
			line += fmt.Sprintf("   (%d errors)", op.Errors)
		}
		fmt.Println(line)
	}
	fmt.Printf("  DynamoDB capacity per %s: %.2f WRU, %.2f RRU (%.0f WRU and %.0f RRU as DynamoDB reported them; %d requests estimated from item sizes)\n",
		what, tot.WCU/float64(tasks), tot.RCU/float64(tasks), snap.ReportedWCU, snap.ReportedRCU, snap.Estimated)
}

func per(n, tasks int) float64 {
	if tasks == 0 {
		return 0
	}
	return float64(n) / float64(tasks)
}

// cost is dollars per million tasks.
type cost struct {
	dynamo, sqs, s3, lambda float64
}

func (c cost) beforeCompute() float64 { return c.dynamo + c.sqs + c.s3 }

// costOf prices a snapshot of tasks tasks, per million tasks: capacity
// units and requests per task times the price per million (or per 1,000
// times 1,000).
func costOf(snap loadmodel.Snapshot, tasks int, lm lambdaModel) cost {
	tot := snap.Totals()
	t := float64(tasks)
	var c cost
	c.dynamo = (tot.WCU*prices.DynamoWRU + tot.RCU*prices.DynamoRRU) / t
	c.sqs = float64(tot.Chunks) * prices.SQSRequest / t
	c.s3 = (float64(tot.S3[listprices.S3Tier1])*prices.S3Tier1 + float64(tot.S3[listprices.S3Tier2])*prices.S3Tier2) * 1000 / t
	invocations := 1e6 / float64(lm.batch)
	c.lambda = invocations*prices.LambdaRequest/1e6 + invocations*(lm.mb/1024)*(lm.ms/1000)*prices.LambdaGBSecond
	return c
}

type costRow struct {
	name    string
	c       cost
	target  float64
	perTask string
}

func printCosts(rows []costRow, lm lambdaModel) {
	fmt.Printf("cost per million tasks, us-east-1 list prices of %s (cmd/bench/prices.go), from the requests and capacity counted above:\n", PricesDate)
	fmt.Printf("  %-44s %9s %9s %9s %15s %8s %16s\n", "", "DynamoDB", "SQS", "S3", "before compute", "target", "+ Lambda compute")
	for _, r := range rows {
		target := "-"
		if r.target > 0 {
			verdict := "met"
			if r.c.beforeCompute() > r.target {
				verdict = "MISSED"
			}
			target = fmt.Sprintf("<= $%.0f %s", r.target, verdict)
		}
		fmt.Printf("  %-44s %9s %9s %9s %15s %8s %16s\n", r.name, usd(r.c.dynamo), usd(r.c.sqs), usd(r.c.s3), usd(r.c.beforeCompute()), target,
			usd(r.c.beforeCompute()+r.c.lambda))
	}
	fmt.Printf("  Lambda compute: %d tasks per invocation (tuning.ExecutorBatchSize), %.0f MB, %.0f ms billed per invocation (arm64): %s per million tasks\n",
		lm.batch, lm.mb, lm.ms, usd(rows[0].c.lambda))
	child := 1e6 * prices.SFNTransition / 1000
	fmt.Printf("  Step Functions Distributed Map, same work: %s per million items in child-execution transitions alone (one each);\n", usd(child))
	fmt.Printf("    %s with a Standard child workflow of one Task state (its transition too); before compute, which Lambda bills as above\n", usd(2*child))
}

func usd(f float64) string { return fmt.Sprintf("$%.2f", f) }

// printLoad prints the load table: the hottest DynamoDB partitions and S3
// prefixes, their totals over tasks scaled to rate tasks a second, against
// the per-partition and per-prefix limits.
func printLoad(snap loadmodel.Snapshot, tasks int, rate float64) {
	fmt.Printf("load model: per-key totals / %d tasks x %.0f tasks/s\n", tasks, rate)
	// One row per kind of partition key (the layout's record type, on
	// the table or an index): its hottest key, and how many keys of the
	// kind the job touched.
	type group struct {
		hot        loadmodel.Key
		frac, w, r float64
		keys       int
	}
	groups := map[string]*group{}
	for k, v := range snap.Keys {
		if k.Service != "DynamoDB" {
			continue
		}
		res := "table"
		if i := strings.IndexByte(k.Resource, '/'); i >= 0 {
			res = "index " + k.Resource[i+1:]
		}
		name := res + " " + loadmodel.KindOf(k.Key)
		w, r := loadmodel.Scaled(v.WCU, tasks, rate), loadmodel.Scaled(v.RCU, tasks, rate)
		frac := max(w/partitionWCU, r/partitionRCU)
		g := groups[name]
		if g == nil {
			g = &group{}
			groups[name] = g
		}
		g.keys++
		if frac > g.frac || g.hot == (loadmodel.Key{}) {
			g.hot, g.frac, g.w, g.r = k, frac, w, r
		}
	}
	names := make([]string, 0, len(groups))
	for n := range groups {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return groups[names[i]].frac > groups[names[j]].frac })
	// The rates are averages over the job. A key whose whole total is
	// under a second's limit cannot exceed it in any second, however
	// close together its requests come (a bucket of tasks run in order).
	fmt.Printf("  %-18s %-44s %8s %8s %8s %14s\n", "DynamoDB key kind", "its hottest partition key (of n keys)", "WCU/s", "RCU/s", "of limit", "job total W/R")
	for _, n := range names {
		g := groups[n]
		v := snap.Keys[g.hot]
		fmt.Printf("  %-18s %-44s %8.0f %8.0f %7.0f%% %14s\n", n, trim(fmt.Sprintf("%s (of %d)", g.hot.Key, g.keys), 44), g.w, g.r, 100*g.frac,
			fmt.Sprintf("%.0f/%.0f", v.WCU, v.RCU))
	}
	fmt.Printf("    limits: %d WCU/s and %d RCU/s per partition key\n", partitionWCU, partitionRCU)
	fmt.Printf("  %-9s %-52s %10s %10s %9s\n", "S3", "prefix", "PUT/s", "GET/s", "of limit")
	seen := map[loadmodel.Key]bool{}
	for _, by := range []func(loadmodel.KeyStat) float64{
		func(v loadmodel.KeyStat) float64 { return float64(v.Writes) }, func(v loadmodel.KeyStat) float64 { return float64(v.Reads) }} {
		for _, k := range snap.Hottest("S3", 4, by) {
			if seen[k] {
				continue
			}
			seen[k] = true
			v := snap.Keys[k]
			w, r := loadmodel.Scaled(float64(v.Writes), tasks, rate), loadmodel.Scaled(float64(v.Reads), tasks, rate)
			fmt.Printf("  %-9s %-52s %10.0f %10.0f %8.0f%%\n", "", trim(k.Key, 52), w, r, 100*max(w/prefixPUTs, r/prefixGETs))
		}
	}
	// S3 splits a busy prefix by itself, over time, at any character: the
	// rate under a stage's whole output folder shows what it has to
	// split, and the rate under each of the folder's next-level prefixes
	// (the outputs' spread, blob.Spread) what each part then takes, the
	// figure that has to stay under the limit.
	parents := map[string][2]float64{}
	children := map[string]map[string][2]float64{}
	for k, v := range snap.Keys {
		if k.Service != "S3" {
			continue
		}
		p, c := parentPrefix(k.Key, 4), parentPrefix(k.Key, 5)
		add := func(m map[string][2]float64, key string) {
			o := m[key]
			m[key] = [2]float64{o[0] + float64(v.Writes), o[1] + float64(v.Reads)}
		}
		add(parents, p)
		if children[p] == nil {
			children[p] = map[string][2]float64{}
		}
		add(children[p], c)
	}
	pnames := make([]string, 0, len(parents))
	for p := range parents {
		pnames = append(pnames, p)
	}
	sort.Slice(pnames, func(i, j int) bool {
		a, b := parents[pnames[i]], parents[pnames[j]]
		return a[0]+a[1] > b[0]+b[1]
	})
	for _, p := range pnames[:min(3, len(pnames))] {
		c := parents[p]
		w, r := loadmodel.Scaled(c[0], tasks, rate), loadmodel.Scaled(c[1], tasks, rate)
		// The hottest next-level prefix under it, when it has several.
		hw, hr, hot := 0.0, 0.0, ""
		for ck, cv := range children[p] {
			cw, cr := loadmodel.Scaled(cv[0], tasks, rate), loadmodel.Scaled(cv[1], tasks, rate)
			if hot == "" || max(cw/prefixPUTs, cr/prefixGETs) > max(hw/prefixPUTs, hr/prefixGETs) {
				hw, hr, hot = cw, cr, ck
			}
		}
		if n := len(children[p]); n > 1 {
			fmt.Printf("  %-9s %-52s %10.0f %10.0f %9s\n", "", trim(p+"* (all under it)", 52), w, r, "-")
			fmt.Printf("  %-9s %-52s %10.0f %10.0f %8.0f%%\n", "", trim(fmt.Sprintf("  hottest of its %d next-level prefixes: %s", n, strings.TrimPrefix(hot, p)), 52), hw, hr, 100*max(hw/prefixPUTs, hr/prefixGETs))
			continue
		}
		fmt.Printf("  %-9s %-52s %10.0f %10.0f %8.0f%%\n", "", trim(p+"* (all under it)", 52), w, r, 100*max(w/prefixPUTs, r/prefixGETs))
	}
	fmt.Printf("    limits: %d PUT/COPY/POST/DELETE and %d GET/HEAD/LIST per second per prefix (here: a key up to its last '/';\n", prefixPUTs, prefixGETs)
	fmt.Printf("    S3 splits a busier prefix by itself as load grows, answering 503 SlowDown meanwhile)\n")
	fmt.Printf("  %-9s %-52s %10s\n", "SQS", "queue", "req/s")
	for _, k := range snap.Hottest("SQS", 5, func(v loadmodel.KeyStat) float64 { return float64(v.Requests) }) {
		fmt.Printf("  %-9s %-52s %10.0f\n", "", trim(k.Resource, 52), loadmodel.Scaled(float64(snap.Keys[k].Requests), tasks, rate))
	}
	fmt.Printf("    standard queues have no per-queue request limit\n")
}

// parentPrefix is the first n '/'-separated segments of an S3 prefix.
func parentPrefix(p string, n int) string {
	i, seen := 0, 0
	for ; i < len(p) && seen < n; i++ {
		if p[i] == '/' {
			seen++
		}
	}
	return p[:i]
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// printProbe prints the probe's levels, before and after the job.
func printProbe(p emuprobe.Emulator) {
	fmt.Printf("  emulator probes, same run (emuprobe: DynamoDB the store probe, control.Service's Claim and Commit of no-op tasks on jobs\n")
	fmt.Printf("  of its own, on a table of the runner's layout, through a client built as the runner's with its hooks; SQS SendMessageBatch\n")
	fmt.Printf("  of 10, ReceiveMessage, DeleteMessageBatch; by clients the requests a second and a request's mean latency, the plateau the\n")
	fmt.Printf("  median of the levels of several clients; CPU from /proc):\n")
	fmt.Printf("    %s\n", p.Describe())
}

// printFloor prints the run's sustained rate against the emulator floor
// (the mix probe's best level; the least of each part alone, emuprobe.FloorOf,
// as a diagnosis), with its end-to-end rate's share beside it.
func printFloor(rate, sustained float64, probe emuprobe.Emulator, snap loadmodel.Snapshot, tasks int, runnerCPU time.Duration) {
	tot := snap.Totals()
	w, rd := dynamoSplit(snap, tasks)
	f := emuprobe.FloorOf(probe, w, rd, per(tot.Requests["SQS"], tasks), runnerCPU)
	printProbe(probe)
	fmt.Printf("  emulator floor: %s.\n  Each part probed alone, which part is tightest (the least of: the cores over the CPU the emulators and the runner\n", emuprobe.FloorMeaning)
	fmt.Printf("  spend per task; each emulator's plateau over the job's requests per task to it; the runner's CPU is this job's):\n")
	for _, p := range f.Parts {
		fmt.Printf("    %s\n", p)
	}
	if floor := probe.Mix.Floor(); floor > 0 { // else the probe's line says why not
		fmt.Printf("  throughput %.0f tasks/s sustained = %.0f%% of the floor (%.0f tasks/s, the mix probe's best level; each part alone: %.0f, %s; %s); end to end %.0f tasks/s = %.0f%%\n",
			sustained, 100*sustained/floor, floor, f.Rate, f.By, floorVerdict(sustained, floor), rate, 100*rate/floor)
	}
}

// runLoad runs one job of n no-op tasks on an emulator of its own and
// prints the load model, requests per task, time to the last task queued
// and the cost per million tasks.
func runLoad(n, slots int, rate float64, lm lambdaModel) error {
	ctx := context.Background()
	reg := batchwork.NewRegistry()
	reg.Register("noop", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e, err := newBenchEnv(ctx, runner.Options{
		Prefix: fmt.Sprintf("bench-load-%d", time.Now().Unix()), Slots: slots, Registry: reg, SweepEvery: time.Minute,
		Control: control.Config{CountLinger: tuning.CountLinger}, // as deployed
	}, false)
	if err != nil {
		return err
	}
	defer e.close()
	cfg, rec, r, watcher := e.cfg, e.rec, e.r, e.watcher
	taskQueues := map[string]bool{}
	for _, u := range []string{r.Resources.Queues.High, r.Resources.Queues.Normal, r.Resources.Queues.Low} {
		taskQueues[u[strings.LastIndexByte(u, '/')+1:]] = true
	}
	var queued atomic.Int64
	var lastQueued atomic.Int64 // unix nanos when the n-th task message was sent
	// committedThen is the stage's count when the last task was queued
	// (-1 until read): how fast the executors ran while the chains held
	// the emulator, which the simulator predicts too.
	var committedThen atomic.Int64
	committedThen.Store(-1)
	var jobID, jobSpan, queuedBusy atomic.Value
	rec.OnSend = func(queue string, k int, at time.Time) {
		if taskQueues[queue] && queued.Add(int64(k)) >= int64(n) && lastQueued.CompareAndSwap(0, at.UnixNano()) {
			go func() {
				if id, ok := jobID.Load().(string); ok {
					if st, err := r.Service.Status(ctx, "bench", id); err == nil && len(st.Stages) > 0 {
						committedThen.Store(int64(st.Stages[0].Committed))
					}
					if sp, ok := jobSpan.Load().(emuprobe.Span); ok {
						queuedBusy.Store(fmt.Sprintf("%s; %d SQS requests", sp.Busy(), rec.Snapshot().Totals().Ops["SQS"]))
					}
				}
			}()
		}
	}
	e.start(ctx)

	// The emulator's ceilings, for the simulator's prediction.
	probe := emuprobe.Run(ctx, cfg, emuprobe.Target{Table: r.Resources.Table, Bucket: r.Resources.Bucket, Slots: slots})
	rec.Reset()
	queued.Store(0)
	span := emuprobe.StartSpan()
	jobSpan.Store(span)
	cpu0 := emuprobe.CPUTime() // after the span's scan of /proc: no job's CPU
	body := fmt.Appendf(nil, `{"name":"load","stages":[{"name":"s","task":"noop","partitions":{"count":%d}}]}`, n)
	start := time.Now()
	res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: "load-1", Spec: body})
	if err != nil {
		return err
	}
	jobID.Store(res.JobID)
	// Progress on stderr every 30 s; the status is read once a second, so
	// the harness adds little load to the emulator.
	progress := time.NewTicker(30 * time.Second)
	defer progress.Stop()
	go func() {
		for range progress.C {
			fmt.Fprintf(os.Stderr, "  load: %.0fs, %d task messages sent\n", time.Since(start).Seconds(), queued.Load())
		}
	}()
	st, err := waitEvery(ctx, watcher, res.JobID, 2*time.Hour, time.Second)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if st.Ended != nil {
		elapsed = st.Ended.Sub(start)
	}
	progress.Stop()
	cpu := emuprobe.CPUTime() - cpu0
	spanned, left := span.Describe(n)
	ran := rec.Snapshot() // before the settling sweep, no job's (jobcost.go)
	probe = probe.Around(emuprobe.Run(ctx, cfg, emuprobe.Target{Table: r.Resources.Table, Bucket: r.Resources.Bucket, Slots: slots}))
	if err := settle(ctx, r); err != nil {
		return err
	}
	snap := rec.Snapshot()
	fmt.Printf("load job of %d no-op tasks (%d executor slots): %s in %.1fs, %.0f tasks/s; bench process CPU %.0f µs per task\n",
		n, slots, st.State, elapsed.Seconds(), float64(n)/elapsed.Seconds(), float64(cpu.Microseconds())/float64(n))
	if floor := probe.Mix.Floor(); floor > 0 { // its 100,000 tasks leave the job's start and end a few seconds of minutes
		fmt.Printf("  %.0f%% of the floor (%.0f tasks/s, the mix probe's best level before and after this job, on its table)\n",
			100*float64(n)/elapsed.Seconds()/floor, floor)
	}
	var queuedIn time.Duration
	if t := lastQueued.Load(); t > 0 {
		queuedIn = time.Unix(0, t).Sub(start)
		fmt.Printf("  materialization: submit to the last task queued %.1fs (%d task messages sent; %d tasks committed by then)\n",
			queuedIn.Seconds(), queued.Load(), committedThen.Load())
		if b, ok := queuedBusy.Load().(string); ok {
			fmt.Printf("    until then, %s\n", b)
		}
	} else {
		fmt.Printf("  materialization: only %d task messages seen sent\n", queued.Load())
	}
	simEmulator("load job", []int{n}, snap, probe, slots, cpu/time.Duration(n), elapsed, queuedIn, committedThen.Load(), left)
	fmt.Printf("    %s\n", spanned)
	printRequests(snap, n, "task")
	if err := checkJobCost(ctx, watcher, res.JobID, ran); err != nil { // jobcost.go
		return err
	}
	printLoad(snap, n, rate)
	printCosts([]costRow{{name: fmt.Sprintf("no-op task (this %d-task job)", n), c: costOf(snap, n, lm), target: 2}}, lm)
	return nil
}

// oneOutput runs a job of n tasks that each write one object, and prints
// its requests per task.
func oneOutput(ctx context.Context, r *runner.Runner, watcher *control.Service, rec *loadmodel.Recorder, n int, rate float64, lm lambdaModel) (costRow, error) {
	rec.Reset()
	body := fmt.Appendf(nil, `{"name":"one-output","stages":[{"name":"s","task":"bench.one-output","partitions":{"count":%d}}]}`, n)
	start := time.Now()
	res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: "bench-one-output", Spec: body})
	if err != nil {
		return costRow{}, err
	}
	st, err := wait(ctx, watcher, res.JobID, 20*time.Minute)
	if err != nil {
		return costRow{}, err
	}
	ran := rec.Snapshot() // before the settling sweep, no job's (jobcost.go)
	if err := settle(ctx, r); err != nil {
		return costRow{}, err
	}
	snap := rec.Snapshot()
	fmt.Printf("job of %d one-output tasks (each writes one object): %s in %.1fs\n", n, st.State, time.Since(start).Seconds())
	printRequests(snap, n, "task")
	if err := checkJobCost(ctx, watcher, res.JobID, ran); err != nil { // jobcost.go
		return costRow{}, err
	}
	printLoad(snap, n, rate)
	return costRow{name: "one-output task (writes one object)", c: costOf(snap, n, lm), target: 7}, nil
}

// wordCount runs word count with maps map tasks and reducers reducers over
// a generated corpus, and prints the map stage's requests per map task:
// those from the submit to the map stage's last commit (the reduce stage
// starts after it).
func wordCount(ctx context.Context, r *runner.Runner, watcher *control.Service, rec *loadmodel.Recorder, maps, reducers int, lm lambdaModel) (costRow, error) {
	const split = 64 << 10
	corpus := wordcount.Corpus(7, maps*split-split/2)
	prefix := blob.InputsPrefix(principal.Key("bench")) + "wordcount/"
	if err := r.Blob.PutIfAbsent(ctx, prefix+"corpus.txt", corpus); err != nil {
		return costRow{}, err
	}
	rec.Reset()
	start := time.Now()
	res, err := r.Service.Submit(ctx, control.SubmitRequest{Owner: "bench", IdempotencyKey: "bench-wordcount",
		Spec: wordcount.Spec("wordcount", "inputs:wordcount/", split, reducers)})
	if err != nil {
		return costRow{}, err
	}
	var snap loadmodel.Snapshot
	var st control.JobStatus
	mapTasks := 0
	for {
		st, err = watcher.Status(ctx, "bench", res.JobID)
		if err != nil {
			return costRow{}, err
		}
		if len(st.Stages) > 0 && st.Stages[0].Total > 0 && st.Stages[0].Committed == st.Stages[0].Total {
			snap, mapTasks = rec.Snapshot(), st.Stages[0].Total
			break
		}
		if st.State != "RUNNING" {
			return costRow{}, fmt.Errorf("word count ended %s before its map stage committed: %s", st.State, st.Error)
		}
		time.Sleep(20 * time.Millisecond)
	}
	st, err = wait(ctx, watcher, res.JobID, 20*time.Minute)
	if err != nil {
		return costRow{}, err
	}
	puts := snap.Ops["S3.PutObject"].Requests + snap.Ops["S3.UploadPart"].Requests
	fmt.Printf("word count, %d map tasks x %d reducers: %s in %.1fs; map stage: %.2f S3 PUTs per map task\n",
		mapTasks, reducers, st.State, time.Since(start).Seconds(), per(puts, mapTasks))
	printRequests(snap, mapTasks, "map task")
	return costRow{name: fmt.Sprintf("word-count map task, %d reducers", reducers), c: costOf(snap, mapTasks, lm)}, nil
}
