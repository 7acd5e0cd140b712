package main

// The simulator's lines (internal/sim): its prediction of each emulator
// job, fed the emulator's probed ceilings (probe.go) and the job's
// requests per task,
// next to the measurement; and its prediction of a million-task job on
// AWS at the load model's rate, with the capacity deploying.md sets for
// that rate.

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"time"

	"github.com/batchwork/batchwork/cmd/bench/emuprobe"
	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/internal/sim"
	listprices "github.com/batchwork/batchwork/shared/cost"
)

// simTolerance is how far the emulator predictions may be off (issue 31).
const simTolerance = 0.15

// awsTasks is the job the AWS prediction runs.
const awsTasks = 1000000

// measuredProfile is the latest job's profile, which the AWS prediction
// uses (the load job's when it ran: the largest).
var measuredProfile *sim.Profile

// documentedProfile is a no-op task as docs/performance.md's load model
// measured it (100,000 tasks: 2.73 requests, 2.38 WRU and 0.17 RRU a task,
// SQS 0.46, the hottest key the due index's 208 WCU/s and the job item's
// 104 RCU/s at 10,000 tasks a second): for -sim, which runs no emulator.
var documentedProfile = sim.Profile{DynamoRequests: 2.27, WRU: 2.38, RRU: 0.17, HotWRU: 0.0208, HotRRU: 0.0104,
	SQSRequests: 0.46, SQSBilled: 0.46}

// profileOf is what one of tasks tasks asked of the services, from the
// recorder's snapshot.
func profileOf(snap loadmodel.Snapshot, tasks int) sim.Profile {
	tot := snap.Totals()
	t := float64(tasks)
	_, reads := dynamoSplit(snap, tasks)
	p := sim.Profile{
		DynamoRequests: per(tot.Ops["DynamoDB"], tasks), DynamoReads: reads, WRU: tot.WCU / t, RRU: tot.RCU / t,
		SQSRequests: per(tot.Requests["SQS"], tasks), SQSBilled: per(tot.Chunks, tasks),
		S3Puts: per(tot.S3[listprices.S3Tier1], tasks), S3Gets: per(tot.S3[listprices.S3Tier2], tasks),
	}
	if k := snap.Hottest("DynamoDB", 1, func(v loadmodel.KeyStat) float64 { return v.WCU }); len(k) > 0 {
		p.HotWRU = snap.Keys[k[0]].WCU / t
	}
	if k := snap.Hottest("DynamoDB", 1, func(v loadmodel.KeyStat) float64 { return v.RCU }); len(k) > 0 {
		p.HotRRU = snap.Keys[k[0]].RCU / t
	}
	return p
}

func simPrices() sim.Prices {
	return sim.Prices{DynamoWRU: prices.DynamoWRU, DynamoRRU: prices.DynamoRRU, SQSRequest: prices.SQSRequest,
		S3Put: prices.S3Tier1, S3Get: prices.S3Tier2, LambdaRequest: prices.LambdaRequest, LambdaGBSecond: prices.LambdaGBSecond}
}

// simEmulator predicts a job of stages on the emulator just probed (its
// DynamoDB and SQS ceilings and lone-request latencies, slots executor
// slots) from the job's own profile, and prints the prediction next to
// the measured figures: the job's time, and when queued > 0 the time to
// its first stage's last task queued and the tasks committed by then
// (doneThen). A prediction off by more than simTolerance prints FAIL.
//
// left, the cores other work left over the job, gives a second
// prediction, no verdict: the same model with the machine as the job had
// it, which tells an error of the probes' few seconds of the machine from
// one of the model or its prices.
func simEmulator(what string, stages []int, snap loadmodel.Snapshot, probe emuprobe.Emulator, slots int, runnerCPU, took, queued time.Duration, doneThen int64, left float64) {
	tasks := 0
	for _, n := range stages {
		tasks += n
	}
	p := profileOf(snap, tasks)
	measuredProfile = &p
	if probe.Dynamo.Rate <= 0 || probe.SQS.Rate <= 0 {
		fmt.Printf("  simulator: no prediction (the emulator's ceilings were not measured)\n")
		return
	}
	m := sim.Measured{DynamoRate: probe.Dynamo.Rate, DynamoLatency: probe.Dynamo.Latency, SQSRate: probe.SQS.Rate, SQSLatency: probe.SQS.Latency}
	if probe.Dynamo.CPU > 0 && probe.SQS.CPU > 0 && runnerCPU > 0 && probe.Dynamo.Cores > 0 {
		// The cores the machine's other work left over the store probe:
		// on a quiet machine all of them.
		m.Cores = min(float64(runtime.NumCPU()), probe.Dynamo.Cores)
		m.DynamoCPU, m.SQSCPU, m.RunnerCPU = probe.DynamoCPU(dynamoSplit(snap, tasks)), probe.SQS.CPU, runnerCPU
		m.IdleCores = probe.Idle.DynamoDB + probe.Idle.SQS
		if mix := probe.MixDynamoCPU(dynamoSplit(snap, tasks)); mix > 0 { // the emulators sharing the cores (mixprobe.go)
			// The emulators' ceilings are what the mix probe's best level
			// served (sim.Measured.MixDynamoRate, MixSQSCPU).
			m.DynamoCPU, m.SQSCPU = mix, probe.Mix.All.SQSCPU()
			m.MixDynamoRate, m.MixSQSCPU, m.SendShare = probe.Mix.Best.DynamoRate(), probe.Mix.Best.SQSCPU(), probe.SQS.SendShare
		}
	}
	r, err := sim.Run(sim.Emulator(stages, p, m, slots, 1))
	if err != nil {
		fmt.Printf("  simulator: %v\n", err)
		return
	}
	if queued > 0 { // the throughput job's floor lines print the probe
		printProbe(probe)
	}
	fmt.Printf("  simulator (internal/sim; the probes' mean ceilings DynamoDB %.0f and SQS %.0f requests/s, lone requests %.1f and %.1f ms; %d slots; this job's requests per task):\n",
		m.DynamoRate, m.SQSRate, ms(m.DynamoLatency), ms(m.SQSLatency), slots)
	if m.Cores > 0 {
		fmt.Printf("    on %.2f cores shared (of %d, what other work left over the probes), %.2f of them the emulators' idle: emulator CPU %.0f µs a DynamoDB and %.0f µs an SQS request (the mix probe's), the runner's %.0f µs a task (this job's)\n",
			m.Cores, runtime.NumCPU(), m.IdleCores, us(m.DynamoCPU), us(m.SQSCPU), us(m.RunnerCPU))
	}
	if m.MixDynamoRate > 0 {
		fmt.Printf("    ceilings from the mix probe's best level: DynamoDB Local its %.0f writes/s, this job's %.3f reads a task beside them; moto one core at its %.0f µs a request (%.0f/s), a send %.2f times that (the SQS probe's)\n",
			m.MixDynamoRate, p.DynamoReads, us(m.MixSQSCPU), 1/max(1e-9, m.MixSQSCPU.Seconds()), m.SendShare)
	}
	rate := float64(tasks) / took.Seconds()
	fmt.Printf("    %s: predicted %.0f tasks/s (%.1fs), measured %.0f tasks/s (%.1fs): %s\n", what, r.Rate, r.Finished.Seconds(), rate, took.Seconds(),
		verdict(r.Rate, rate))
	if queued > 0 {
		fmt.Printf("    last task queued: predicted %.1fs (%d tasks committed by then), measured %.1fs (%d): %s\n", r.Queued.Seconds(), r.DoneByQueued,
			queued.Seconds(), doneThen, verdict(r.Queued.Seconds(), queued.Seconds()))
	}
	if m.Cores > 0 && left > 0 {
		m.Cores = left
		if r, err = sim.Run(sim.Emulator(stages, p, m, slots, 1)); err == nil {
			fmt.Printf("    on the %.2f cores other work left over the job instead (no verdict): %.0f tasks/s, %+.1f%%; last task queued %.1fs\n",
				left, r.Rate, 100*(r.Rate-rate)/rate, r.Queued.Seconds())
		}
	}
}

// verdict is the prediction's error, and whether it is within the
// tolerance.
func verdict(predicted, measured float64) string {
	e := (predicted - measured) / measured
	if math.Abs(e) <= simTolerance {
		return fmt.Sprintf("error %+.1f%% (within %.0f%%)", 100*e, 100*simTolerance)
	}
	return fmt.Sprintf("error %+.1f%%: FAIL, off by more than %.0f%%", 100*e, 100*simTolerance)
}

// simAWS prints the prediction of a million-task job on AWS at rate
// tasks a second: no-op tasks and one-second tasks with the capacity set
// for the rate, and no-op tasks queued by one chain (what queueing in
// segments changed).
func simAWS(rate float64, p sim.Profile, source string) {
	c := sim.CapacityFor(rate, p)
	fmt.Printf("simulator: a %d-task job on AWS at a target of %.0f tasks/s (internal/sim; %s: %.2f WRU, %.2f RRU, %.2f DynamoDB and %.2f SQS requests a task)\n",
		awsTasks, rate, source, p.WRU, p.RRU, p.DynamoRequests, p.SQSRequests)
	fmt.Printf("  capacity for the rate (docs/deploying.md): table warm throughput %d write / %d read units, executor MaximumConcurrency %d, reserved %d, account %d\n",
		c.WarmWrite, c.WarmRead, c.MaxConcurrency, c.Reserved, c.Account)
	for _, sc := range []struct {
		name     string
		taskTime time.Duration
		workers  int
	}{
		{"no-op tasks", 0, 0},
		{"1-second tasks", time.Second, 0},
		{"no-op tasks, queued by one chain (a stage not split into segments)", 0, 1},
	} {
		cfg := sim.AWS([]int{awsTasks}, sc.taskTime, p, c, simPrices(), 1)
		if sc.workers > 0 {
			cfg.Materialize.Workers = sc.workers
		}
		start := time.Now()
		r, err := sim.Run(cfg)
		if err != nil {
			fmt.Printf("  %s: %v\n", sc.name, err)
			continue
		}
		fmt.Printf("  %s: queued in %.0fs, finished in %.0fs: %.0f tasks/s (peak %.0f in a second; target %s); simulated in %.1fs\n",
			sc.name, r.Queued.Seconds(), r.Finished.Seconds(), r.Rate, r.PeakRate, met(r.Rate >= rate), time.Since(start).Seconds())
		if g, ok := r.Binding(rate); ok {
			fmt.Printf("    limits first: %s, from %.0fs to %.0fs, at %.0f tasks/s\n", g.Limit, g.From.Seconds(), g.To.Seconds(), g.Rate)
		}
		fmt.Printf("    limits in turn: %s\n", segments(r.Segments))
		fmt.Printf("    throttled requests: %s; %d invocations (%d cold starts, at most %d at once), %.0f Lambda seconds\n",
			throttles(r.Throttles), r.Invocations, r.ColdStarts, r.PeakConcurrency, r.LambdaSeconds)
		fmt.Printf("    cost: %s (DynamoDB %s, SQS %s, S3 %s, Lambda %s at %.0f MB)\n", usd(r.Cost.Total()), usd(r.Cost.DynamoDB), usd(r.Cost.SQS),
			usd(r.Cost.S3), usd(r.Cost.Lambda), cfg.Lambda.MemoryMB)
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// segments shortens the limits over the run: each stretch and its rate,
// stretches under 2 s left out.
func segments(gs []sim.Segment) string {
	var parts []string
	for _, g := range gs {
		if g.To-g.From < 2*time.Second && len(gs) > 1 {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.0f-%.0fs (%.0f/s)", g.Limit, g.From.Seconds(), g.To.Seconds(), g.Rate))
	}
	return strings.Join(parts, "; ")
}

func throttles(m map[string]int) string {
	var parts []string
	for _, k := range []string{sim.ThrottleTableWrite, sim.ThrottleTableRead, sim.ThrottlePartitionWrite, sim.ThrottlePartitionRead} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// simAWSMeasured prints the AWS prediction from this run's latest
// profile, or the documented one when no job ran.
func simAWSMeasured(rate float64) {
	if measuredProfile == nil {
		simAWS(rate, documentedProfile, "the documented load-model profile")
		return
	}
	simAWS(rate, *measuredProfile, "this run's last job's profile")
}

// dynamoSplit is the job's DynamoDB operations a task (requests, a
// batch's statements each: loadmodel.OpStat.Ops), writes and reads
// (GetItem, BatchGetItem, Query, Scan), which the probes price apart.
func dynamoSplit(snap loadmodel.Snapshot, tasks int) (writes, reads float64) {
	all := per(snap.Totals().Ops["DynamoDB"], tasks)
	for _, op := range []string{"GetItem", "BatchGetItem", "Query", "Scan"} {
		reads += per(snap.Ops["DynamoDB."+op].Ops, tasks)
	}
	return all - reads, reads
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
