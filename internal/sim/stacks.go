package sim

import (
	"math"
	"time"

	"github.com/batchwork/batchwork/shared/tuning"
)

// The code's materialization settings (control.Config's defaults,
// queue.SendBatch's concurrency).
const (
	codeChunkTasks      = 100
	codeChunksPerCall   = 100
	codeSendConcurrency = 8
	codeSegmentTasks    = 10_000
)

// codeChains is how many chains queue the largest of stages at once: a
// stage is queued in segments of codeSegmentTasks tasks, each its own
// chain (shared/control/stages, segments.go), all running at once.
func codeChains(stages []int) int {
	n := 1
	for _, t := range stages {
		n = max(n, (t+codeSegmentTasks-1)/codeSegmentTasks)
	}
	return n
}

// AWS's documented limits, and the latencies this model assumes where AWS
// documents none (each a typical figure, stated in docs/performance.md).
const (
	// DynamoDB on-demand: a new table's warm throughput, the partition
	// limits, and traffic above twice the previous peak within 30 minutes
	// may be throttled.
	NewTableWrite  = 4000
	NewTableRead   = 12000
	PartitionWrite = 1000
	PartitionRead  = 3000
	DoublingAfter  = 30 * time.Minute
	// Lambda: SQS event sources start at 5 concurrent batches and add up
	// to 300 a minute; a function scales by 1,000 environments every 10
	// seconds; an account has 1,000 concurrent executions by default.
	ESMInitial        = 5
	ESMPerMinute      = 300
	FunctionPer10s    = 1000
	DefaultAccountCap = 1000
	// Assumed: a DynamoDB single-item write, an SQS request, a Go
	// (provided.al2023, arm64) cold start, a relay through the timer
	// queue's event source, a Fargate container's start after the scaling
	// alarm (a minute of metrics, then tens of seconds to start).
	DynamoLatency = 5 * time.Millisecond
	SQSLatency    = 10 * time.Millisecond
	// InvocationFlush is a Lambda executor's write of its batched counts
	// and their stage follow-ups when its invocation ends (FlushCounts
	// writes at once, whatever tuning.CountLinger; the follow-ups may add
	// reads and writes), as the model has been calibrated with.
	InvocationFlush = 50 * time.Millisecond
	ColdStart       = 150 * time.Millisecond
	RelayLatency    = 100 * time.Millisecond
	FargateStartup  = 100 * time.Second
)

// Headroom is the share over a rate's own units that CapacityFor warms a
// table to.
const Headroom = 1.25

// Capacity is what a stack sets for a rate: deploying.md's "Capacity for
// 10,000 tasks a second", from infra/batchwork's settings.
type Capacity struct {
	// Table warm throughput, units a second (the new-table figures when
	// the rate needs no more).
	WarmWrite, WarmRead int
	// The executors' event source MaximumConcurrency, the function's
	// reserved concurrency and the account's concurrency.
	MaxConcurrency, Reserved, Account int
}

// CapacityFor is the capacity deploying.md sets for rate tasks a second
// of profile p: warm throughput for the rate's write and read units with
// a quarter's headroom (rounded up to a thousand): throttled requests'
// retries and the sweep's writes come on top of the tasks' own units, so a
// table warmed to exactly the rate's units serves a little less than the
// rate, the event source at its most (1,000),
// reserved concurrency for the three ready queues, and an account limit
// raised to hold it.
func CapacityFor(rate float64, p Profile) Capacity {
	up := func(units float64, floor int) int {
		return max(floor, int(math.Ceil(units/1000))*1000)
	}
	c := Capacity{WarmWrite: up(rate*p.WRU*Headroom, NewTableWrite), WarmRead: up(rate*p.RRU*Headroom, NewTableRead), MaxConcurrency: 1000}
	c.Reserved = 3 * c.MaxConcurrency
	// Lambda keeps 100 of the account's pool unreserved.
	c.Account = c.Reserved + 100
	return c
}

// AWS is a deployed stack with capacity c running a job of stages whose
// tasks each take taskTime, on the Lambda executor.
func AWS(stages []int, taskTime time.Duration, p Profile, c Capacity, prices Prices, seed uint64) Config {
	return Config{
		Stages: stages, TaskTime: taskTime, Profile: p, Prices: prices, Seed: seed,
		Dynamo: &Table{WarmWrite: float64(c.WarmWrite), WarmRead: float64(c.WarmRead), DoublingAfter: DoublingAfter,
			PartitionWrite: PartitionWrite, PartitionRead: PartitionRead, Latency: DynamoLatency},
		SQS: &Server{Name: "SQS", Latency: SQSLatency},
		Materialize: Materialize{ChunkTasks: codeChunkTasks, ChunksPerCall: codeChunksPerCall, SendConcurrency: codeSendConcurrency,
			// A chain a segment; the api function hands a segment's rest to
			// the timer queue as every later call does.
			Workers: codeChains(stages), FirstHandoff: RelayLatency, Relay: RelayLatency},
		Lambda: &Lambda{
			BatchSize: tuning.ExecutorBatchSize, MaxConcurrency: c.MaxConcurrency, Reserved: c.Reserved, AccountLimit: c.Account,
			ESMInitial: ESMInitial, ESMPerMinute: ESMPerMinute, ScalePer10s: FunctionPer10s, ColdStart: ColdStart,
			// The batched counts' write at the invocation's end, then the
			// messages' deletion.
			Overhead: InvocationFlush + SQSLatency, MemoryMB: tuning.ExecutorMemoryMB,
		},
	}
}

// Measured is an emulator as the bench probes it (cmd/bench, probe.go):
// each service's ceiling, the most requests a second it served at any
// concurrency, and a request's latency with nothing else in flight.
type Measured struct {
	// DynamoRate and SQSRate are the store and SQS probes' plateaus, each
	// emulator probed alone: the ceilings where the mix probe measured
	// nothing.
	DynamoRate, SQSRate       float64
	DynamoLatency, SQSLatency time.Duration
	// Cores is the machine's, which the emulators and the runner share
	// (0: not modelled); DynamoCPU and SQSCPU the emulators' CPU time per
	// request, as probed; RunnerCPU the runner process's per task (its
	// control plane and executors), as measured over the job.
	Cores                        float64
	DynamoCPU, SQSCPU, RunnerCPU time.Duration
	// IdleCores is the CPU the emulators spend a second whatever they
	// serve (the JVM's own threads, the idle runner's long polls), taken
	// off Cores: DynamoCPU and SQSCPU are net of it.
	IdleCores float64
	// MixDynamoRate, when set, is the DynamoDB requests a second (writes:
	// claims, commits, counts) the mix probe served at its best level,
	// the emulators and the runner sharing the cores. DynamoDB Local
	// serializes its writes: at that level and over the jobs alike it
	// keeps 0.8 to 0.9 of a core busy with them, whatever cores are left,
	// so its ceiling for writes is the rate that level served. Its cores
	// over its CPU a request would not do: the most cores a probe level
	// saw it use (1.1 to 1.5) come from levels with reads, which it serves
	// beside the writes, and put the ceiling 40% over what the jobs got.
	MixDynamoRate float64
	// MixSQSCPU, when set, is moto's CPU a request at the mix probe's best
	// level. moto, one Python process, serves one request at a time on at
	// most one core (the SQS probe's levels keep it at 0.93 to 0.99), so
	// its ceiling with the cores shared is one core at that price: what
	// holds the load job's chains' 10,000 sends, whose time to queue its
	// plateau probed alone, on a machine of its own, puts a quarter short.
	MixSQSCPU time.Duration
	// SendShare, when set, is moto's CPU for a SendMessageBatch over its
	// mean request's in the probes' cycle of a send, a receive and a
	// delete (about 1.1: a send costs about a fifth more than the
	// others). A load job's chains send while its executors wait on them,
	// so the time to queue runs at the sends' price.
	SendShare float64
}

// sqsCeiling is moto's requests a second: one core at the mix probe's
// price, or its plateau probed alone where the mix probe measured
// nothing.
func (m Measured) sqsCeiling() float64 {
	if m.MixSQSCPU > 0 {
		return 1 / m.MixSQSCPU.Seconds()
	}
	return m.SQSRate
}

// dynamoCeiling is the emulated DynamoDB's ceiling in requests a second
// of p's mix: its writes at the mix probe's rate, its reads served beside
// them; the store probe's plateau where the mix probe measured nothing.
func (m Measured) dynamoCeiling(p Profile) float64 {
	writes := p.DynamoRequests - p.DynamoReads
	if m.MixDynamoRate <= 0 || writes <= 0 {
		return m.DynamoRate
	}
	return m.MixDynamoRate * p.DynamoRequests / writes
}

// maxSendShare bounds Measured.SendShare: a receive and a delete cost
// something.
const maxSendShare = 2

// minCores is the least of the cores the model gives the tasks' work: a
// machine whose idle emulators seem to take every core still serves.
const minCores = 0.05

// LimitCores names the machine's cores when they limit an emulator run.
const LimitCores = "the machine's cores (emulators and runner)"

// server is an emulator's service of rate requests a second whose lone
// request takes alone: its service time (1/rate) and a fixed rest (the
// client, the connection, the parsing) that a request spends outside the
// server's queue.
func server(name string, rate float64, alone time.Duration) *Server {
	rest := alone
	if rate > 0 {
		rest = max(0, alone-time.Duration(float64(time.Second)/rate))
	}
	return &Server{Name: name, Rate: rate, Latency: rest}
}

// Emulator is the local runner on an emulator measured as m, with slots
// executor slots. The emulator is one process per service: every chain,
// segment and executor slot queues on the same Server, so parallel chains
// share its rate; a sequential chain still waits a request's latency per
// step, so it runs no faster than that however idle the server. The
// runner has the timer queue, so every hand-off is a relay.
func Emulator(stages []int, p Profile, m Measured, slots int, seed uint64) Config {
	c := Config{
		Stages: stages, Profile: p, Seed: seed,
		Dynamo: server("DynamoDB (emulator)", m.dynamoCeiling(p), m.DynamoLatency),
		SQS:    server("SQS (emulator)", m.sqsCeiling(), m.SQSLatency),
		// The runner's executors batch their counts (control.Config's
		// CountLinger, as the bench runs them) and write them before each
		// round of deletes.
		StageLinger: tuning.CountLinger,
		CountRounds: tuning.DeleteRound,
		Materialize: Materialize{ChunkTasks: codeChunkTasks, ChunksPerCall: codeChunksPerCall, SendConcurrency: codeSendConcurrency,
			Workers: codeChains(stages), FirstHandoff: 10 * time.Millisecond, Relay: 10 * time.Millisecond},
		// The runner's poller keeps one receive in flight a queue
		// (internal/executor/feed), and the job's tasks are on one.
		Slots: &Slots{Count: slots, Receivers: 1},
	}
	sendCPU, takeCPU := 1.0, 1.0 // a send's and a receive's or delete's CPU, in SQSCPUs
	if share := min(max(m.SendShare, 0), maxSendShare); share > 0 {
		sendCPU, takeCPU = share, (3-share)/2
		// A chain's sends are 10,000 requests over a minute or more: the
		// machine's mean over the mix probe's levels prices them (SQSCPU),
		// not the best level's (the ceiling), whose price leans cheap.
		// The cycle's mean is a third each: what a send spends over it,
		// a receive and a delete spend under it.
		c.SendCost, c.TakeCost = sendCPU, takeCPU
		if m.MixSQSCPU > 0 && m.SQSCPU > 0 {
			c.SendCost *= float64(m.SQSCPU) / float64(m.MixSQSCPU)
		}
	}
	if m.Cores > 0 {
		// A chunk's own requests: its marker and count, its sends; a
		// task's, the rest of the profile's, and the runner's CPU.
		chunk := float64(codeChunkTasks)
		sends := math.Ceil(chunk / 10)
		c.CPU = &Server{Name: LimitCores, Rate: max(minCores, m.Cores-m.IdleCores)}
		c.ChunkCPU = time.Duration(chunkDynamoRequests*float64(m.DynamoCPU) + sends*sendCPU*float64(m.SQSCPU))
		c.TaskCPU = m.RunnerCPU + time.Duration(max(0, p.DynamoRequests-chunkDynamoRequests/chunk)*float64(m.DynamoCPU)+
			max(0, p.SQSRequests-sends/chunk)*takeCPU*float64(m.SQSCPU))
	}
	return c
}
