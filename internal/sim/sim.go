// Package sim is a discrete-event simulation of a Batchwork stack running
// one job: its stages' materialization (the chain of chunks that writes
// ready markers and queues the tasks), the executors that claim, run and
// commit them (Lambda behind an SQS event source, or long-polling slots),
// and the services in between (DynamoDB, SQS), each as AWS documents its
// limits or as an emulator measures. It predicts the time to queue, the
// time to finish, the rate and what limits it second by second, the
// throttles and the cost.
//
// Work is simulated in groups, not per request: a Lambda invocation's
// batch claims and commits together, a chunk's messages arrive together.
// A run is deterministic for its seed; a million tasks take one to a
// few seconds (more when many requests are throttled and retried). docs/performance.md describes the model and its calibration.
package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/batchwork/batchwork/shared/tuning"
)

// Profile is what one task asks of the services, measured by the bench's
// recording middleware (internal/loadmodel) over a whole job: requests
// and capacity per task, materialization and sweep included.
type Profile struct {
	DynamoRequests float64
	// DynamoReads is the reads (GetItem, BatchGetItem, Query) among
	// DynamoRequests, which an emulator may serve beside its writes.
	DynamoReads float64
	WRU, RRU    float64
	// HotWRU and HotRRU are the capacity per task that lands on the
	// job's hottest partition key.
	HotWRU, HotRRU float64
	SQSRequests    float64
	// SQSBilled is SQSRequests counted as AWS bills them (each started
	// 64 KB of payload one request).
	SQSBilled      float64
	S3Puts, S3Gets float64
}

// Materialize is how a stage's tasks are queued (shared/control/stages):
// chunks of ChunkTasks, each a ready marker PutItem, its messages sent in
// batches of ten, SendConcurrency at a time, and the stage's count
// advanced (an UpdateItem). One call queues ChunksPerCall chunks, then
// hands the rest on: the first call of a stage after FirstHandoff (on AWS
// the api and commit functions have no timer queue, so the rest waits for
// the sweep: half its period on average), later ones after Relay (the
// timer queue). Workers chains run at once, taking chunks in turn: the
// code runs one a segment of a large stage (segments.go).
type Materialize struct {
	ChunkTasks, ChunksPerCall, SendConcurrency, Workers int
	FirstHandoff, Relay                                 time.Duration
}

// Prices are list prices (the bench's prices.go): DynamoDB per million
// units, SQS per million requests, S3 per 1,000 requests, Lambda per
// million invocations and per GB-second, Fargate per vCPU-hour and
// GB-hour.
type Prices struct {
	DynamoWRU, DynamoRRU           float64
	SQSRequest                     float64
	S3Put, S3Get                   float64
	LambdaRequest, LambdaGBSecond  float64
	FargateVCPUHour, FargateGBHour float64
}

// Config is one simulated job on one stack.
type Config struct {
	// Stages are the job's stages' task counts, run one after another.
	Stages []int
	// TaskTime is a task's own run time, between its claim and its
	// commit.
	TaskTime time.Duration
	Profile  Profile
	// Dynamo is DynamoDB: a *Table on AWS, a *Server for an emulator.
	Dynamo Store
	// SQS serves the materializers' sends; its latency is each receive's.
	SQS *Server
	// CPU, when set, is the cores an emulator and the runner share (one
	// machine): a Server whose Rate is the cores, serving CPU seconds.
	// Each task asks TaskCPU of it at its claim, each chunk ChunkCPU at
	// its marker; an emulator's services and the runner's executors wait
	// on it as on their own queues. Nil on AWS, whose services and
	// functions each bring their own.
	CPU               *Server
	TaskCPU, ChunkCPU time.Duration
	// SendCost and TakeCost, when set, are what a materializer's send
	// and an executor's receive or delete ask of an emulator's SQS, in
	// its mean requests (its Rate's): moto spends more on a send. 0: 1.
	SendCost, TakeCost float64
	Materialize        Materialize
	// StageLinger, when set, is the executors' count linger (a process's
	// commit counts wait up to this long from the first of a batch, or
	// until countBatchMax wait, and go in one write): a stage completes,
	// and the next starts, when its last count is written. Zero: each
	// commit counts at once (Lambda, whose invocation's flush is in its
	// Overhead).
	StageLinger time.Duration
	// CountRounds, when set with StageLinger, is how often the executors'
	// delete rounds write the pending counts before their messages go
	// (tuning.DeleteRound, from the run's start): a batch is written at
	// its linger's end or the next round, whichever comes first.
	CountRounds time.Duration
	// Exactly one of Lambda and Slots.
	Lambda *Lambda
	Slots  *Slots
	Prices Prices
	Seed   uint64
}

// Segment is a stretch of the run during which one thing limited the
// rate.
type Segment struct {
	Limit    string
	From, To time.Duration
	// Rate is the tasks committed a second over the segment.
	Rate float64
}

// Dollars is a job's cost by service.
type Dollars struct {
	DynamoDB, SQS, S3, Lambda, Fargate float64
}

// Total is the sum.
func (d Dollars) Total() float64 { return d.DynamoDB + d.SQS + d.S3 + d.Lambda + d.Fargate }

// Result is a run's prediction.
type Result struct {
	Tasks int
	// Queued is when the first stage's last task was queued; Finished
	// when the last task committed.
	Queued, Finished time.Duration
	// DoneByQueued is the tasks committed when the first stage's last
	// task was queued: the executors' share of the emulator while the
	// chains send.
	DoneByQueued int
	Rate         float64 // tasks per second over Finished
	// PeakRate is the most tasks committed in one second.
	PeakRate    float64
	Segments    []Segment
	Throttles   map[string]int
	Invocations int
	ColdStarts  int
	// PeakConcurrency is the most invocations (or busy slots) at once.
	PeakConcurrency int
	// LambdaSeconds is the invocations' billed duration.
	LambdaSeconds float64
	Cost          Dollars
}

// Limits the run names besides the services' and executors'.
const (
	LimitMaterialization = "materialization chain"
	LimitHandoff         = "materialization handed to the sweep"
	LimitDraining        = "draining (every task queued, none waiting)"
	LimitStarting        = "executors starting"
)

// maxSimulated bounds a run that cannot finish (a stage its executors
// never start), in simulated seconds: 30 days.
const maxSimulated = 30 * 24 * 3600

// Per chunk, materialization's own requests: the marker's PutItem and the
// count's UpdateItem (about 1 WRU each).
const chunkDynamoRequests = 2

var errConfig = errors.New("sim: bad config")

func (c Config) check() error {
	switch {
	case len(c.Stages) == 0:
		return fmt.Errorf("%w: Stages: at least one stage", errConfig)
	case c.Dynamo == nil || c.SQS == nil:
		return fmt.Errorf("%w: Dynamo and SQS: both needed", errConfig)
	case (c.Lambda == nil) == (c.Slots == nil):
		return fmt.Errorf("%w: Lambda, Slots: exactly one", errConfig)
	case c.Materialize.ChunkTasks < 1 || c.Materialize.ChunksPerCall < 1 || c.Materialize.SendConcurrency < 1 || c.Materialize.Workers < 1:
		return fmt.Errorf("%w: Materialize: ChunkTasks, ChunksPerCall, SendConcurrency and Workers must be positive", errConfig)
	case c.Slots != nil && c.Slots.Count < 1:
		return fmt.Errorf("%w: Slots.Count %d: must be positive", errConfig, c.Slots.Count)
	}
	for i, n := range c.Stages {
		if n < 1 {
			return fmt.Errorf("%w: Stages[%d] %d: must be positive", errConfig, i, n)
		}
	}
	if c.Lambda != nil {
		if err := c.Lambda.check(); err != nil {
			return fmt.Errorf("%w: %v", errConfig, err)
		}
	}
	return nil
}

type kind int

const (
	evMatStart kind = iota
	evMatPut
	evMatSend
	evMatVisible
	evMatAdvance
	evMatChunkDone
	evDispatch
	evClaim
	evCommit
	evDone
	evEnd
	evTick
	evStageEnd
)

// receiveMax is the most messages an SQS receive hands out.
const receiveMax = 10

// countBatchMax is the counts a batch writes at once when full
// (shared/control/tasks/countbatch.go).
const countBatchMax = tuning.CountBatchMax

type invocation struct {
	start   float64
	pending int
	// slots is how many executor slots the invocation holds (Slots: its
	// receive's batch); prepaid the SQS requests its receive already
	// charged of its tasks' share (sqsRest).
	slots   int
	prepaid float64
	// receiving: its receive is in flight (state.receiving counts it).
	receiving bool
}

type event struct {
	t        float64
	seq      uint64
	k        kind
	inv      *invocation
	n, try   int
	worker   int
	from, to int
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].t != e[j].t {
		return e[i].t < e[j].t
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

type worker struct {
	calls   int // chunks of the current call
	handoff bool
	waiting bool // handed off to the sweep, until it picks the rest up
}

type state struct {
	cfg     Config
	rng     *rand.Rand
	q       events
	seq     uint64
	now     float64
	claim   Cost
	commit  Cost
	advance Cost // a chunk's count
	sqsRest float64

	stage, next, queued, done int
	workers                   []worker
	visible, running, envs    int
	receiving                 int     // Slots' receives in flight
	first                     float64 // when the first message arrived; -1 before
	waking                    bool    // a dispatch is scheduled for the slots' start
	finished                  bool

	// batchFrom is when the first count of the pending batch was handed
	// in (-1: none pending), batchN how many wait (StageLinger).
	batchFrom float64
	batchN    int

	perSecond []int // tasks committed in each second
	labels    []string
	res       Result
}

// Run simulates cfg's job.
func Run(cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	s := &state{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), first: -1, batchFrom: -1}
	p := cfg.Profile
	// The profile's requests are the whole job's; materialization's
	// chunks are simulated on their own, so the executors' share is the
	// rest: the claim (1 request, 1 WRU: it creates the task's record),
	// then the commit with everything else a task causes (its count, the
	// markers' looks, liveness, the sweep). The hottest key's writes come
	// with the chunks (the stage's record and its sweep index entry, moved
	// once a chunk: performance.md's load model), so its share is charged
	// to each chunk's count, at the rate the chains queue, which parallel
	// chains raise far above the commits' rate.
	perChunk := float64(cfg.Materialize.ChunkTasks)
	s.claim = Cost{Requests: 1, WRU: 1}
	s.commit = Cost{
		Requests: max(1, p.DynamoRequests-1-chunkDynamoRequests/perChunk),
		WRU:      max(0, p.WRU-1-chunkDynamoRequests/perChunk), RRU: p.RRU,
		HotRRU: p.HotRRU,
	}
	s.advance = Cost{Requests: 1, WRU: 1, HotWRU: p.HotWRU * perChunk}
	s.sqsRest = max(0, p.SQSRequests-math.Ceil(perChunk/10)/perChunk)
	for _, n := range cfg.Stages {
		s.res.Tasks += n
	}
	s.workers = make([]worker, cfg.Materialize.Workers)
	s.startStage(0)
	s.push(event{t: 1, k: evTick})
	for len(s.q) > 0 && !s.finished && s.now < maxSimulated {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		s.handle(e)
	}
	// The last invocations end after the last commit: bill them.
	for len(s.q) > 0 && s.finished {
		if e := heap.Pop(&s.q).(event); e.k == evEnd {
			s.now = e.t
			s.handle(e)
		}
	}
	if !s.finished {
		return s.res, fmt.Errorf("sim: run ended with %d of %d tasks committed", s.res.Tasks-s.remaining(), s.res.Tasks)
	}
	s.finish()
	return s.res, nil
}

func (s *state) remaining() int {
	n := 0
	for _, t := range s.cfg.Stages[s.stage:] {
		n += t
	}
	return n - s.done
}

func (s *state) push(e event) {
	s.seq++
	e.seq = s.seq
	heap.Push(&s.q, e)
}

// backoff is the control plane's retry wait (awsconf: 50 ms doubling to
// 2 s, full jitter).
func (s *state) backoff(try int) float64 {
	return s.rng.Float64() * min(2, 0.05*math.Pow(2, float64(try)))
}

func (s *state) startStage(i int) {
	s.stage, s.next, s.queued, s.done = i, 0, 0, 0
	for w := range s.workers {
		s.workers[w] = worker{handoff: true}
		s.push(event{t: s.now, k: evMatStart, worker: w})
	}
}

func (s *state) handle(e event) {
	c := s.cfg
	total := c.Stages[s.stage]
	switch e.k {
	case evMatStart:
		s.workers[e.worker].waiting = false
		if s.next >= total {
			return
		}
		from, to := s.next, min(s.next+c.Materialize.ChunkTasks, total)
		s.next = to
		s.push(event{t: s.now, k: evMatPut, worker: e.worker, from: from, to: to})
	case evMatPut, evMatAdvance:
		cost := Cost{Requests: 1, WRU: 1}
		if e.k == evMatAdvance {
			cost = s.advance
		}
		served, done := c.Dynamo.serve(s.now, 1, cost)
		if served == 0 {
			e.t, e.try = s.now+s.backoff(e.try), e.try+1
			s.push(e)
			return
		}
		if c.CPU != nil && e.k == evMatPut {
			done = max(done, c.CPU.work(s.now, c.ChunkCPU.Seconds()))
		}
		next := evMatSend
		if e.k == evMatAdvance {
			next = evMatChunkDone
		}
		s.push(event{t: done, k: next, worker: e.worker, from: e.from, to: e.to})
	case evMatSend:
		// A chunk's sends go SendConcurrency at a time (queue.SendBatch):
		// each round queues at an emulator's SQS behind what is there,
		// and a receive sent meanwhile comes before the next round.
		all, conc := (e.to-e.from+9)/10, c.Materialize.SendConcurrency
		k := min(conc, all-e.n)
		next := evMatSend
		if e.n+k == all {
			next = evMatVisible
		}
		s.push(event{t: c.SQS.rounds(s.now, k, conc, orOne(c.SendCost)), k: next, worker: e.worker, from: e.from, to: e.to, n: e.n + k})
	case evMatVisible:
		s.visible += e.to - e.from
		s.queued += e.to - e.from
		if s.queued == total && s.stage == 0 {
			s.res.Queued, s.res.DoneByQueued = dur(s.now), s.done
		}
		s.dispatch()
		s.push(event{t: s.now, k: evMatAdvance, worker: e.worker, from: e.from, to: e.to})
	case evMatChunkDone:
		w := &s.workers[e.worker]
		w.calls++
		wait := 0.0
		if w.calls == c.Materialize.ChunksPerCall {
			w.calls = 0
			wait = c.Materialize.Relay.Seconds()
			if w.handoff {
				wait, w.handoff = c.Materialize.FirstHandoff.Seconds(), false
				w.waiting = true
			}
		}
		s.push(event{t: s.now + wait, k: evMatStart, worker: e.worker})
	case evDispatch:
		s.waking = false
		s.dispatch()
	case evClaim:
		if e.inv.receiving {
			e.inv.receiving = false
			s.receiving--
			defer s.dispatch() // the receiver asks again for the slots still free
		}
		served, done := c.Dynamo.serve(s.now, e.n, s.claim)
		if served < e.n {
			s.push(event{t: s.now + s.backoff(e.try), k: evClaim, inv: e.inv, n: e.n - served, try: e.try + 1})
		}
		if served > 0 && c.CPU != nil {
			done = max(done, c.CPU.work(s.now, float64(served)*c.TaskCPU.Seconds()))
		}
		if served > 0 {
			s.push(event{t: done + c.TaskTime.Seconds(), k: evCommit, inv: e.inv, n: served})
		}
	case evCommit:
		served, done := c.Dynamo.serve(s.now, e.n, s.commit)
		if served < e.n {
			s.push(event{t: s.now + s.backoff(e.try), k: evCommit, inv: e.inv, n: e.n - served, try: e.try + 1})
		}
		if served > 0 {
			// The rest of a task's SQS requests (receives, deletes,
			// visibility) load an emulator; no one waits on them. A
			// slot's receive was charged when it was sent (dispatch).
			rest := float64(served) * s.sqsRest * orOne(c.TakeCost)
			paid := min(rest, e.inv.prepaid)
			e.inv.prepaid -= paid
			c.SQS.work(s.now, rest-paid)
			s.push(event{t: done, k: evDone, inv: e.inv, n: served})
		}
	case evDone:
		s.committed(e.n)
		e.inv.pending -= e.n
		if e.inv.pending == 0 {
			if c.Lambda != nil {
				s.push(event{t: s.now + c.Lambda.Overhead.Seconds(), k: evEnd, inv: e.inv})
			} else {
				s.running -= e.inv.slots
				s.dispatch()
			}
		}
	case evEnd:
		s.running--
		s.res.Invocations++
		s.res.LambdaSeconds += s.now - e.inv.start
		s.dispatch()
	case evTick:
		s.tick()
		s.dispatch()
		s.push(event{t: s.now + 1, k: evTick})
	case evStageEnd:
		if s.stage+1 < len(s.cfg.Stages) {
			s.startStage(s.stage + 1)
			return
		}
		s.finished = true
		s.res.Finished = dur(s.now)
	}
}

func (s *state) committed(n int) {
	sec := int(s.now)
	for len(s.perSecond) <= sec {
		s.perSecond = append(s.perSecond, 0)
	}
	s.perSecond[sec] += n
	s.done += n
	written := s.count(n)
	if s.done < s.cfg.Stages[s.stage] {
		return
	}
	s.batchFrom, s.batchN = -1, 0
	s.push(event{t: written, k: evStageEnd})
}

// count hands n commits' counts to the batch (StageLinger) and returns
// when they are written.
func (s *state) count(n int) float64 {
	l := s.cfg.StageLinger.Seconds()
	if l <= 0 {
		return s.now
	}
	if s.batchFrom >= 0 && s.now >= s.written(l) {
		s.batchFrom, s.batchN = -1, 0 // its timer or a delete round wrote it
	}
	if s.batchFrom < 0 {
		s.batchFrom = s.now
	}
	s.batchN += n
	if s.batchN >= countBatchMax {
		s.batchFrom, s.batchN = -1, 0 // full: written at once
		return s.now
	}
	return s.written(l)
}

// written is when the pending batch is written: its linger's end, or the
// first delete round after its first count if that comes sooner.
func (s *state) written(linger float64) float64 {
	w := s.batchFrom + linger
	if r := s.cfg.CountRounds.Seconds(); r > 0 {
		w = min(w, (math.Floor(s.batchFrom/r)+1)*r)
	}
	return w
}

// dispatch starts invocations or fills slots while messages wait and the
// executors allow.
func (s *state) dispatch() {
	if s.visible == 0 {
		return
	}
	if s.first < 0 {
		s.first = s.now
	}
	receive := s.cfg.SQS.Latency.Seconds()
	if l := s.cfg.Lambda; l != nil {
		limit, _ := l.Limit(s.now - s.first)
		for s.running < limit && s.visible > 0 {
			k := min(l.BatchSize, s.visible)
			s.visible -= k
			s.running++
			at := s.now + receive
			if s.running > s.envs {
				s.envs = s.running
				s.res.ColdStarts++
				at += l.ColdStart.Seconds()
			}
			s.res.PeakConcurrency = max(s.res.PeakConcurrency, s.running)
			s.push(event{t: at, k: evClaim, inv: &invocation{start: s.now, pending: k}, n: k})
		}
		return
	}
	sl := s.cfg.Slots
	if ready := s.first + sl.StartAfter.Seconds(); s.now < ready {
		if !s.waking {
			s.waking = true
			s.push(event{t: ready, k: evDispatch})
		}
		return
	}
	// The free slots share a receive of up to a batch. It waits its turn
	// at an emulator's SQS like any request: moto serves one at a time,
	// so while the chains' sends fill it the executors get few messages
	// and leave it to the sends, which puts the chains' time to queue where
	// moto's rate for the sends alone does.
	for s.running < sl.Count && s.visible > 0 && (sl.Receivers == 0 || s.receiving < sl.Receivers) {
		k := min(receiveMax, sl.Count-s.running, s.visible)
		s.receiving++
		s.visible -= k
		s.running += k
		s.res.PeakConcurrency = max(s.res.PeakConcurrency, s.running)
		// The receive is one of the tasks' own requests (sqsRest): a
		// profile without them has none to wait on.
		take := min(1, float64(k)*s.sqsRest) * orOne(s.cfg.TakeCost)
		s.push(event{t: s.cfg.SQS.work(s.now, take), k: evClaim, inv: &invocation{start: s.now, pending: k, slots: k, prepaid: take, receiving: true}, n: k})
	}
}

// tick labels the second that just ended with what limited it.
func (s *state) tick() {
	label := ""
	switch {
	case s.cfg.CPU != nil && s.busiest() != "":
		label = s.busiest()
	case s.cfg.Dynamo.saturated(s.now) != "":
		label = s.cfg.Dynamo.saturated(s.now)
	case s.cfg.SQS.saturated(s.now) != "":
		label = s.cfg.SQS.saturated(s.now)
	case s.visible > 0 && s.cfg.Lambda != nil:
		_, label = s.cfg.Lambda.Limit(s.now - s.first)
	case s.visible > 0 && s.now < s.first+s.cfg.Slots.StartAfter.Seconds():
		label = LimitStarting
	case s.visible > 0:
		label = LimitSlots
	case s.queued < s.cfg.Stages[s.stage] && s.allWaiting():
		label = LimitHandoff
	case s.queued < s.cfg.Stages[s.stage]:
		label = LimitMaterialization
	default:
		label = LimitDraining
	}
	s.labels = append(s.labels, label)
}

// busiest names, on one machine (an emulator with CPU set), the server
// with the longest queue at now: the cores, or the emulator's DynamoDB or
// SQS, any of which may have a request waiting at a given instant; ""
// when none does.
func (s *state) busiest() string {
	name, most := "", 0.0
	for _, v := range []Store{s.cfg.CPU, s.cfg.Dynamo, s.cfg.SQS} {
		if sv, ok := v.(*Server); ok && sv.Rate > 0 && sv.free-s.now > most {
			name, most = sv.Name, sv.free-s.now
		}
	}
	return name
}

func (s *state) allWaiting() bool {
	for _, w := range s.workers {
		if !w.waiting {
			return false
		}
	}
	return true
}

func (s *state) finish() {
	r := &s.res
	c := s.cfg
	end := r.Finished.Seconds()
	r.Rate = float64(r.Tasks) / end
	for i, n := range s.perSecond {
		// The last, partial second's count is not a rate.
		if float64(i+1) <= end {
			r.PeakRate = max(r.PeakRate, float64(n))
		}
	}
	for i := 0; i < len(s.labels); {
		j := i
		n := 0
		for ; j < len(s.labels) && s.labels[j] == s.labels[i]; j++ {
			if j < len(s.perSecond) {
				n += s.perSecond[j]
			}
		}
		r.Segments = append(r.Segments, Segment{Limit: s.labels[i], From: dur(float64(i)), To: dur(min(float64(j), end)),
			Rate: float64(n) / (min(float64(j), end) - float64(i))})
		i = j
	}
	r.Throttles = map[string]int{}
	for k, v := range c.Dynamo.throttles() {
		r.Throttles[k] = v
	}
	p, t, pr := c.Profile, float64(r.Tasks), c.Prices
	r.Cost.DynamoDB = t * (p.WRU*pr.DynamoWRU + p.RRU*pr.DynamoRRU) / 1e6
	r.Cost.SQS = t * p.SQSBilled * pr.SQSRequest / 1e6
	r.Cost.S3 = t * (p.S3Puts*pr.S3Put + p.S3Gets*pr.S3Get) / 1000
	if l := c.Lambda; l != nil {
		r.Cost.Lambda = float64(r.Invocations)*pr.LambdaRequest/1e6 + r.LambdaSeconds*l.MemoryMB/1024*pr.LambdaGBSecond
	}
	if sl := c.Slots; sl != nil && sl.PerContainer > 0 {
		// Containers run from their start to the job's end.
		containers := float64((sl.Count + sl.PerContainer - 1) / sl.PerContainer)
		hours := containers * max(0, end-s.first-sl.StartAfter.Seconds()) / 3600
		r.Cost.Fargate = hours * (sl.VCPU*pr.FargateVCPUHour + sl.MemoryGB*pr.FargateGBHour)
	}
}

// orOne is x, or 1 when x is unset.
func orOne(x float64) float64 {
	if x > 0 {
		return x
	}
	return 1
}

func dur(sec float64) time.Duration { return time.Duration(sec * float64(time.Second)) }

// Binding is the first segment's limit that held the rate below target:
// what limits the job first. "" when none did.
func (r Result) Binding(target float64) (Segment, bool) {
	for _, g := range r.Segments {
		if g.Limit != LimitDraining && g.Rate < target {
			return g, true
		}
	}
	return Segment{}, false
}
