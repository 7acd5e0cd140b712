package emuprobe

// The store probe: DynamoDB Local priced on the job's own requests. A
// hand-made mix of single-item writes on a bare table costs the emulator
// a half to a quarter of the CPU the job's requests do (their items,
// condition and update expressions, the `due` index they move, the
// consumed capacity they ask for), so the probe drives what the executors
// drive: control.Service's Claim and Commit of no-op tasks (the store's
// conditional claim that writes the task's record, the fenced commit, the
// batched counts on the stage's counter shards and their follow-ups), on
// jobs it submits (their job, stage and ready-marker writes) to a table
// of the runner's own layout, through a client built as the runner's with
// the same hooks (the cost meter, the bench's recorder). Its queue and
// blob store are in memory: only DynamoDB is measured here (SQS has its
// own probe), and no executor sees the probe's tasks.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/tuning"
)

// probeJobTasks is each probe job's size: a stage the submit queues whole
// (100 chunks of 100), so no relay is needed, and more tasks than a probe
// claims at a quiet emulator's rate.
const probeJobTasks = 10_000

// A fresh DynamoDB Local's JVM spends two to three times the CPU a
// request that it spends once its compiler has warmed it, most of the fall
// in its first 5,000 of these tasks (10,000 requests; `bench -probe 14`
// shows it), but not all: after 5,000, the probe after a job (the job's
// 6,000 tasks and the probe's own later) served 2 to 38% more (mix probe, best level) than the probe
// before it in each of six full benches. A job of a few seconds on a fresh
// one runs on its costliest requests, and a probe before it sees no steady
// figure. So the first probe on an emulator warms it with freshWarmTasks
// first (at most freshWarmMax), and every job runs on a warm emulator, as
// a long-lived one is.
const (
	freshWarmTasks = 15_000
	freshWarmMax   = 75 * time.Second
)

// warmed is the DynamoDB endpoints warmed so far.
var warmed sync.Map

// warmFresh runs fn from 16 clients until freshWarmTasks tasks were done.
func warmFresh(fn func(w int) int) {
	start := time.Now()
	for done := 0.0; done < freshWarmTasks && time.Since(start) < freshWarmMax; {
		rate, _ := loop(probeWarm, 16, fn)
		done += rate * probeWarm.Seconds()
	}
}

// StoreCycle is what one no-op task's claim and commit cost, as the store
// probe measured them over its levels of several clients.
type StoreCycle struct {
	// Requests is DynamoDB requests per task (claim, commit, the batched
	// counts, the jobs' own writes amortised).
	Requests float64
	// OwnCPU is this process's CPU per task over those levels: the control
	// plane's and the DynamoDB client's share of a task, and the idle
	// runner's pollers beside them.
	OwnCPU time.Duration
	// ReadCPU is DynamoDB Local's CPU per request of the job's reads
	// (priceReads); the Ceiling's CPU is its writes'.
	ReadCPU time.Duration
}

// DynamoCPU is DynamoDB Local's CPU per request of a job that asks
// writes and reads a task: each at its probed price.
func (p Emulator) DynamoCPU(writes, reads float64) time.Duration {
	if writes+reads <= 0 || p.Task.ReadCPU <= 0 {
		return p.Dynamo.CPU
	}
	return time.Duration((writes*float64(p.Dynamo.CPU) + reads*float64(p.Task.ReadCPU)) / (writes + reads))
}

// probeStore runs the store probe on a table of runnerTable's layout and
// returns its Ceiling in DynamoDB requests a second, the emulator CPU per
// request being DynamoDB Local's alone (the java process).
func probeStore(ctx context.Context, cfg aws.Config, runnerTable string, clients []int) (Ceiling, StoreCycle, error) {
	g, err := newRig(ctx, cfg, runnerTable, testdouble.NewQueue())
	if err != nil {
		return Ceiling{}, StoreCycle{}, err
	}
	defer g.close(ctx)
	svc, src, rec, sdk := g.svc, g.src, g.rec, g.sdk
	one := func(int) int {
		ref, err := src.next(ctx)
		if err != nil {
			return 0
		}
		cl, err := svc.Claim(ctx, ref)
		if err != nil {
			return 0
		}
		if svc.Commit(ctx, cl, control.CommitResult{WrittenHere: true}) != nil {
			return 0
		}
		return 1
	}
	requests := func() int { return rec.Snapshot().Totals().Ops["DynamoDB"] } // a batch's statements each: loadmodel.OpStat.Ops
	if _, done := warmed.LoadOrStore(aws.ToString(sdk.Options().BaseEndpoint), true); !done {
		warmFresh(one)
	}
	warm(one)
	ceil, cycle := sweepTasks(clients, probeStep, one, requests)
	_ = svc.FlushCounts(ctx)
	cycle.ReadCPU = priceReads(ctx, svc, src, requests)
	return ceil, cycle, nil
}

// rig is a probe's control plane: a control.Service on a table of the
// runner's layout, through a client built as the runner's with its hooks
// (the cost meter, the bench's recorder), and its source of tasks.
type rig struct {
	svc   *control.Service
	src   *taskSource
	rec   *loadmodel.Recorder
	sdk   *dynamodb.Client
	cfg   aws.Config // hardened, with the recorder and meter installed
	table string
}

// newRig copies runnerTable's layout to a table of the probe's own and
// submits its first job; q is the service's queue (the probe jobs'
// materialization sends there).
func newRig(ctx context.Context, cfg aws.Config, runnerTable string, q control.Queue) (*rig, error) {
	c := cfg.Copy()
	awsconf.Harden(&c)
	rec := &loadmodel.Recorder{}
	rec.Install(&c)
	meter := control.NewMeter()
	meter.Install(&c)
	sdk := dynamodb.NewFromConfig(cfg)
	table, err := copyTable(ctx, sdk, runnerTable)
	if err != nil {
		return nil, err
	}
	g := &rig{rec: rec, sdk: sdk, cfg: c, table: table}
	if err := rec.DescribeTable(ctx, sdk, table); err != nil {
		g.close(ctx)
		return nil, err
	}
	db, err := ddbwire.ForStore(c, os.Getenv(ddbwire.EnvClient))
	if err != nil {
		g.close(ctx)
		return nil, err
	}
	g.svc = control.New(control.Config{Queues: control.Queues{High: "probe-high", Normal: "probe-normal", Low: "probe-low",
		Timer: "probe-timer", DLQ: "probe-dead"}, CountLinger: tuning.CountLinger, Meter: meter},
		dynamo.New(db, table), q, testdouble.NewBlob(nil), slog.New(slog.NewTextHandler(io.Discard, nil)))
	g.src = &taskSource{svc: g.svc}
	if err := g.src.refill(ctx); err != nil {
		g.close(ctx)
		return nil, err
	}
	return g, nil
}

func (g *rig) close(ctx context.Context) {
	_, _ = g.sdk.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: &g.table})
}

// probeReads is how long the reads are priced.
const probeReads = 500 * time.Millisecond

// priceReads is DynamoDB Local's CPU per request of the job's reads, the
// other share of its requests: status reads of the probe's job (its
// record, stages and counter shards, whose sets of counted partitions are
// its largest items) and a sweep pass (its `due` index queries and ready
// markers' looks), from one client. A read reads items many times a
// claim's size: it costs the emulator several times a write's CPU.
func priceReads(ctx context.Context, svc *control.Service, src *taskSource, requests func() int) time.Duration {
	src.mu.Lock()
	job := src.job
	src.mu.Unlock()
	r0 := requests()
	e0, _ := EmulatorCPUOf(dynamoLocal)
	_, _ = svc.Sweep(ctx)
	for stop := time.Now().Add(probeReads); time.Now().Before(stop); {
		if _, err := svc.Status(ctx, "probe", job); err != nil {
			break
		}
	}
	e1, _ := EmulatorCPUOf(dynamoLocal)
	if n := requests() - r0; n > 0 {
		return (e1 - e0) / time.Duration(n)
	}
	return 0
}

// sweepTasks runs fn (one task a call) at each level of clients and
// converts the tasks into DynamoDB requests by requests, the recorder's
// count: the levels' rates and latencies are per request.
func sweepTasks(levels []int, step time.Duration, fn func(int) int, requests func() int) (Ceiling, StoreCycle) {
	var c Ceiling
	var plateau []float64
	var cpu, own, wall time.Duration
	var tasks, reqs, other float64
	for _, n := range levels {
		others := StartOthers()
		r0 := requests()
		start := time.Now()
		e0, _ := EmulatorCPUOf(dynamoLocal)
		o0 := CPUTime()
		rate, lat := loop(step, n, fn)
		took := time.Since(start)
		e1, _ := EmulatorCPUOf(dynamoLocal)
		o1 := CPUTime()
		oc := others.Cores()
		k := rate * took.Seconds()
		perTask := 0.0
		if k > 0 {
			perTask = float64(requests()-r0) / k
		}
		l := Level{Clients: n, Rate: rate * perTask}
		if perTask > 0 {
			l.Latency = time.Duration(float64(lat) / perTask)
			l.CPU = time.Duration(float64(e1-e0) / (k * perTask))
		}
		c.Levels = append(c.Levels, l)
		if n == 1 {
			c.Latency = l.Latency
			continue
		}
		plateau = append(plateau, l.Rate)
		cpu += e1 - e0
		own += o1 - o0
		other += oc * took.Seconds()
		wall += took
		tasks += k
		reqs += k * perTask
	}
	c.Rate = median(plateau)
	var cycle StoreCycle
	if tasks > 0 && reqs > 0 {
		c.CPU = time.Duration(float64(cpu) / reqs)
		c.span, c.served = wall, reqs
		c.Cores = CoresLeft(other / wall.Seconds())
		cycle = StoreCycle{Requests: reqs / tasks, OwnCPU: time.Duration(float64(own) / tasks)}
	}
	return c, cycle
}

// taskSource hands out the probe jobs' tasks, one at a time, submitting
// a new job when the last one's are all handed out.
type taskSource struct {
	svc  *control.Service
	mu   sync.Mutex
	job  string
	seq  atomic.Int64
	jobs int
}

func (s *taskSource) refill(ctx context.Context) error {
	s.jobs++
	body := fmt.Appendf(nil, `{"name":"probe","stages":[{"name":"s","task":"noop","partitions":{"count":%d}}]}`, probeJobTasks)
	res, err := s.svc.Submit(ctx, control.SubmitRequest{Owner: "probe", IdempotencyKey: fmt.Sprintf("probe-%d", s.jobs), Spec: body})
	if err != nil {
		return fmt.Errorf("store probe: submit: %w", err)
	}
	s.job = res.JobID
	s.seq.Store(0)
	return nil
}

func (s *taskSource) next(ctx context.Context) (domain.TaskRef, error) {
	for {
		s.mu.Lock()
		job := s.job
		s.mu.Unlock()
		if i := s.seq.Add(1) - 1; i < probeJobTasks {
			return domain.TaskRef{Job: job, Stage: 0, Partition: int(i)}, nil
		}
		s.mu.Lock()
		if s.job == job { // no other client refilled meanwhile
			if err := s.refill(ctx); err != nil {
				s.mu.Unlock()
				return domain.TaskRef{}, err
			}
		}
		s.mu.Unlock()
	}
}

// copyTable creates a table of name's key schema and global secondary
// indexes, on demand, and waits for it.
func copyTable(ctx context.Context, db *dynamodb.Client, name string) (string, error) {
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &name})
	if err != nil {
		return "", fmt.Errorf("store probe: describe %s: %w", name, err)
	}
	t := d.Table
	copyName := fmt.Sprintf("bench-storeprobe-%d", time.Now().UnixNano())
	in := &dynamodb.CreateTableInput{TableName: &copyName, BillingMode: types.BillingModePayPerRequest,
		KeySchema: t.KeySchema, AttributeDefinitions: t.AttributeDefinitions}
	for _, g := range t.GlobalSecondaryIndexes {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{IndexName: g.IndexName,
			KeySchema: g.KeySchema, Projection: g.Projection})
	}
	if _, err := db.CreateTable(ctx, in); err != nil {
		return "", fmt.Errorf("store probe: create table: %w", err)
	}
	return copyName, dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: &copyName}, time.Minute)
}
