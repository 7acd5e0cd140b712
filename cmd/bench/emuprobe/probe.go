package emuprobe

// The emulator's Ceiling, probed at the jobs' concurrency. A job's
// processes share one HTTP client (shared/awsconf) and keep dozens of
// requests in flight (16 or 32 slots, the count batcher, the heartbeats,
// materialization's chains, the sweep) on an emulator warmed by the
// job's own first seconds; a few sequential clients on a fresh emulator
// (DynamoDB Local's JVM serves a third of its rate before its compiler
// has warmed it) find much less than the jobs get. The probe sends the
// no-op job's request mix through a client built as the runner builds its
// own (awsconf.Harden), once the emulator is warm, at 1, 8, 16, 32 and 64
// clients, and takes the median rate of the levels of several clients:
// the plateau the emulator reaches. The one-client level gives a
// request's latency with nothing queued, which the simulator adds to
// every request (a sequential chain runs at that latency, not at the
// server's rate).

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/awsconf"
)

// Level is one step of a probe: clients in a loop for a while.
type Level struct {
	Clients int
	Rate    float64       // requests served a second
	Latency time.Duration // mean time a request took
	// CPU is the emulator's CPU per request at this level (the store
	// probe's: DynamoDB Local's); 0 where not measured.
	CPU time.Duration
}

// Ceiling is one service's probe: its levels, the plateau (the Ceiling:
// the median rate of the levels of several clients, which a quiet
// machine's emulator serves alike, and which the median keeps from one
// level that other processes on the machine slowed or left alone) and the
// latency of a request alone.
type Ceiling struct {
	Levels  []Level
	Rate    float64
	Latency time.Duration
	// cpu is the emulators' CPU time per request over the levels (the
	// other emulator idle meanwhile): 0 where it is not measured.
	CPU time.Duration
	// span and served are the time and requests CPU was measured over.
	span   time.Duration
	served float64
	// SendShare is moto's CPU for a send over its mean request's (the SQS
	// probe's only; sqssplit.go): 0 where not measured.
	SendShare float64
	// Cores is the machine's cores less what its other work (processes
	// other than the bench and its emulators, /proc/stat) took over the
	// store, SQS and mix probes together (Run): the store probe's only.
	Cores float64
}

// Emulator is the emulator's ceilings in one run; S3's rate is a
// plain 8-client PutObject rate (a no-op task makes no S3 request).
// After around, it is the mean of a probe before a job and one after it
// (before, after): a shared machine's other work moves the Ceiling while
// a job runs, so one end alone may catch a moment busier or quieter than
// the job's span.
type Emulator struct {
	Dynamo, SQS Ceiling
	// Task is the store probe's cost of a task (storeprobe.go).
	Task StoreCycle
	// Mix is the mix probe (mixprobe.go): the floor.
	Mix           Mix
	S3            float64
	Before, After *Emulator
	// Err is why the store probe measured nothing.
	Err error
	// Idle is the emulators' and this process's CPU with no probe
	// running (the runner idle beside them): cores kept busy.
	Idle Idle
}

// Idle is the CPU each process spends a second with no task running: the
// JVM's own threads, moto serving the idle runner's long polls, the
// runner's pollers and beats. The probes' CPU per request is net of it.
type Idle struct {
	DynamoDB, SQS, Runner float64
}

// idleFor is the CPU each process spent over d of no probe.
func idleFor(d time.Duration) Idle {
	j0, _ := EmulatorCPUOf(dynamoLocal)
	e0, _ := EmulatorCPU()
	o0 := CPUTime()
	time.Sleep(d)
	j1, _ := EmulatorCPUOf(dynamoLocal)
	e1, _ := EmulatorCPU()
	o1 := CPUTime()
	sec := d.Seconds()
	return Idle{DynamoDB: (j1 - j0).Seconds() / sec, SQS: (e1 - e0 - (j1 - j0)).Seconds() / sec, Runner: (o1 - o0).Seconds() / sec}
}

// probeIdle is how long the idle CPU is measured: a few hundred ticks.
const probeIdle = time.Second

// net takes idle cores' worth of CPU over the span out of c's CPU per
// request.
func (c *Ceiling) net(idle float64) {
	if c.served > 0 && c.CPU > 0 {
		c.CPU = max(0, c.CPU-time.Duration(idle*float64(c.span)/c.served))
	}
}

// Target is what the probe runs beside: the runner's table (whose layout
// the store probe copies), its bucket, and the job's executor slots.
type Target struct {
	Table, Bucket string
	Slots         int
}

// around is the mean of p, probed before a job, and q, after it.
func (p Emulator) Around(q Emulator) Emulator {
	mean := func(a, b Ceiling) Ceiling {
		return Ceiling{Rate: (a.Rate + b.Rate) / 2, Latency: (a.Latency + b.Latency) / 2, CPU: (a.CPU + b.CPU) / 2, Cores: (a.Cores + b.Cores) / 2,
			SendShare: meanOf(a.SendShare, b.SendShare)}
	}
	task := StoreCycle{Requests: (p.Task.Requests + q.Task.Requests) / 2, OwnCPU: (p.Task.OwnCPU + q.Task.OwnCPU) / 2,
		ReadCPU: (p.Task.ReadCPU + q.Task.ReadCPU) / 2}
	idle := Idle{DynamoDB: (p.Idle.DynamoDB + q.Idle.DynamoDB) / 2, SQS: (p.Idle.SQS + q.Idle.SQS) / 2, Runner: (p.Idle.Runner + q.Idle.Runner) / 2}
	return Emulator{Dynamo: mean(p.Dynamo, q.Dynamo), SQS: mean(p.SQS, q.SQS), Task: task, S3: (p.S3 + q.S3) / 2, Idle: idle, Mix: meanMix(p.Mix, q.Mix), Before: &p, After: &q}
}

// meanOf is the mean of a and b, or the one measured (0: not).
func meanOf(a, b float64) float64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return (a + b) / 2
}

// describe is the probe's levels, or its two ends' after around.
func (p Emulator) Describe() string {
	if p.Before != nil {
		return fmt.Sprintf("before the job: %s\n    after it: %s\n    their mean: DynamoDB %.0f/s, %.1f ms alone, %.0f µs of DynamoDB Local's CPU a request (%.0f µs a read), %.2f requests and %.0f µs of this process's CPU a task, %.2f cores left by other work; SQS %.0f/s, %.1f ms alone, %.0f µs of moto's CPU a request, a send %.2f times its mean request's; %s",
			p.Before.Describe(), p.After.Describe(), p.Dynamo.Rate, ms(p.Dynamo.Latency), us(p.Dynamo.CPU), us(p.Task.ReadCPU), p.Task.Requests, us(p.Task.OwnCPU), p.Dynamo.Cores,
			p.SQS.Rate, ms(p.SQS.Latency), us(p.SQS.CPU), p.SQS.SendShare, p.Idle.describe()) + "\n    mix probe, " + p.Mix.Describe()
	}
	if p.Err != nil {
		return fmt.Sprintf("DynamoDB not measured (%v); SQS %.0f/s (%s; %.0f µs)", p.Err, p.SQS.Rate, p.SQS.Describe(), us(p.SQS.CPU))
	}
	return fmt.Sprintf("DynamoDB %.0f/s (%s; %.0f µs of DynamoDB Local's CPU a request (%.0f µs a read), %.2f requests and %.0f µs of this process's CPU a task, %.2f cores left by other work); SQS %.0f/s (%s; %.0f µs of moto's CPU a request, a send %.2f times its mean request's); %s",
		p.Dynamo.Rate, p.Dynamo.Describe(), us(p.Dynamo.CPU), us(p.Task.ReadCPU), p.Task.Requests, us(p.Task.OwnCPU), p.Dynamo.Cores, p.SQS.Rate, p.SQS.Describe(), us(p.SQS.CPU),
		p.SQS.SendShare, p.Idle.describe()) + "; mix probe: " + p.Mix.Describe()
}

func (i Idle) describe() string {
	return fmt.Sprintf("idle, cores busy: DynamoDB Local %.3f, moto %.3f, the runner %.3f (the CPU per request is net of the emulators')", i.DynamoDB, i.SQS, i.Runner)
}

// rates is the probe as the floor reads it, by service.
func (p Emulator) Rates() map[string]float64 {
	return map[string]float64{"DynamoDB": p.Dynamo.Rate, "SQS": p.SQS.Rate, "S3": p.S3}
}

// The probe's levels and how long each runs, after a warm-up: about 6 s
// in all on a warm emulator, up to 8 s more on a fresh one.
var sqsClients = []int{1, 4, 8, 16}

// storeLevels are the store probe's levels for a job of slots executor
// slots: a lone client (a request's latency with nothing queued), then
// half, all and twice the slots (the job's executors, with its count
// flushes and materialization beside them).
func storeLevels(slots int) []int {
	slots = max(slots, 2)
	return []int{1, slots / 2, slots, 2 * slots}
}

const (
	probeWarm    = 500 * time.Millisecond
	probeWarmMax = 8
	probeSteady  = 0.10
	probeStep    = 600 * time.Millisecond
	probeStepSQS = 400 * time.Millisecond
	probeStepS3  = 500 * time.Millisecond
	S3Clients    = 8
	// plateauClients is the fewest clients whose level counts in the
	// plateau: every level but the lone client's.
	plateauClients = 2
)

// Run measures the emulator's ceilings through a client built
// like the runner's (its retryer and shared HTTP client), not counted.
func Run(ctx context.Context, cfg aws.Config, t Target) Emulator {
	c := cfg.Copy()
	awsconf.Harden(&c)
	bucket := t.Bucket
	var p Emulator
	others := StartOthers()
	p.Dynamo, p.Task, p.Err = probeStore(ctx, cfg, t.Table, storeLevels(t.Slots))
	p.SQS = probeSQS(ctx, sqs.NewFromConfig(c))
	p.SQS.SendShare = sendShare(ctx, c)
	p.Mix = probeMix(ctx, cfg, t.Table, mixLevels(t.Slots))
	if p.Dynamo.Cores > 0 {
		// Over all three probes, a dozen seconds: other work on a shared
		// machine comes and goes within the store probe's few.
		p.Dynamo.Cores = CoresLeft(others.Cores())
	}
	// Idle last: a fresh JVM is still starting before the probe's warm-up.
	p.Idle = idleFor(probeIdle)
	p.Dynamo.net(p.Idle.DynamoDB)
	p.SQS.net(p.Idle.SQS)
	s3c := s3.NewFromConfig(c, awsconf.S3Options(c))
	var seq atomic.Int64
	p.S3, _ = loop(probeStepS3, S3Clients, func(int) int {
		_, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: aws.String(fmt.Sprintf("bench-bare/%d", seq.Add(1))),
			Body: strings.NewReader("0123456789abcdef")})
		return served(err)
	})
	return p
}

// probeSQS runs the SQS cycle of materialization and the executors on a
// queue of its own: a SendMessageBatch of ten, a ReceiveMessage of up to
// ten (no wait), and a DeleteMessageBatch of what it received (moto, a
// Python process, needs no warm-up).
func probeSQS(ctx context.Context, sq *sqs.Client) Ceiling {
	q, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("bench-probe-%d", time.Now().UnixNano()))})
	if err != nil {
		return Ceiling{}
	}
	defer func() { _, _ = sq.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: q.QueueUrl}) }()
	batch := make([]sqstypes.SendMessageBatchRequestEntry, 10)
	for i := range batch {
		batch[i] = sqstypes.SendMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), MessageBody: aws.String("j1a1fd8fa5144ffa078bd8/0/12345")}
	}
	one := func(int) int {
		if _, err := sq.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q.QueueUrl, Entries: batch}); err != nil {
			return 0
		}
		out, err := sq.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q.QueueUrl, MaxNumberOfMessages: 10})
		if err != nil || len(out.Messages) == 0 {
			return 1 + served(err)
		}
		del := make([]sqstypes.DeleteMessageBatchRequestEntry, len(out.Messages))
		for i, m := range out.Messages {
			del[i] = sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(fmt.Sprint(i)), ReceiptHandle: m.ReceiptHandle}
		}
		_, err = sq.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q.QueueUrl, Entries: del})
		return 2 + served(err)
	}
	return sweep(sqsClients, probeStepSQS, one)
}

// warm runs fn from 16 clients in steps of probeWarm until a step's rate
// is within probeSteady of the step before (at most probeWarmMax steps):
// a fresh DynamoDB Local's JVM serves a third of its rate in its first
// seconds and reaches its plateau after a few thousand requests, and the
// jobs run on a warm one.
func warm(fn func(w int) int) {
	last := 0.0
	for range probeWarmMax {
		rate, _ := loop(probeWarm, 16, fn)
		if last > 0 && math.Abs(rate-last) <= probeSteady*last {
			return
		}
		last = rate
	}
}

// sweep runs fn at each level of clients for step and returns the levels
// and the Ceiling; its CPU is the emulators' but DynamoDB Local's (moto's,
// for the SQS probe: DynamoDB Local only serves the idle runner meanwhile).
func sweep(levels []int, step time.Duration, fn func(w int) int) Ceiling {
	var c Ceiling
	var plateau []float64
	served := 0.0
	var cpu time.Duration
	cpuOK := false
	for _, n := range levels {
		start := time.Now()
		e0, ok := EmulatorCPU()
		j0, _ := EmulatorCPUOf(dynamoLocal)
		rate, lat := loop(step, n, fn)
		took := time.Since(start)
		e1, _ := EmulatorCPU()
		j1, _ := EmulatorCPUOf(dynamoLocal)
		cpuOK = ok
		served += rate * took.Seconds()
		cpu += e1 - e0 - (j1 - j0)
		c.span += took
		l := Level{Clients: n, Rate: rate, Latency: lat}
		if k := rate * took.Seconds(); ok && k > 0 {
			l.CPU = time.Duration(float64(e1-e0-(j1-j0)) / k)
		}
		c.Levels = append(c.Levels, l)
		if n >= plateauClients {
			plateau = append(plateau, rate)
		}
		if n == 1 {
			c.Latency = lat
		}
	}
	if cpuOK && served > 0 {
		c.CPU = time.Duration(float64(cpu) / served)
		c.served = served
	}
	c.Rate = median(plateau)
	return c
}

// median is the middle of xs (the mean of the two middle ones), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	k := len(xs)
	return (xs[(k-1)/2] + xs[k/2]) / 2
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// served is one request served, or none.
func served(err error) int {
	if err != nil {
		return 0
	}
	return 1
}

// loop runs fn from workers goroutines for d and returns the requests
// served a second (fn answers how many of its requests were) and their
// mean duration (a client's time over its requests).
func loop(d time.Duration, workers int, fn func(w int) int) (float64, time.Duration) {
	var n, busy atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				t := time.Now()
				if k := fn(w); k > 0 {
					n.Add(int64(k))
					busy.Add(int64(time.Since(t)))
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	if n.Load() == 0 {
		return 0, 0
	}
	return float64(n.Load()) / took.Seconds(), time.Duration(busy.Load() / n.Load())
}

// describe is a probe's levels on one line: clients, rate, latency.
func (c Ceiling) Describe() string {
	parts := make([]string, 0, len(c.Levels))
	for _, l := range c.Levels {
		part := fmt.Sprintf("%d: %.0f/s %.1f ms", l.Clients, l.Rate, ms(l.Latency))
		if l.CPU > 0 {
			part += fmt.Sprintf(" %.0f µs", us(l.CPU))
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
