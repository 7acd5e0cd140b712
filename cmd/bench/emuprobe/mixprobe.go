package emuprobe

// The mix probe: the emulators serving the no-op job's own requests, both
// at once, with no framework around them. Each service probed alone (the
// store probe, the SQS probe) finds the other emulator idle and the
// machine's cores its own; in a job DynamoDB Local, moto and the runner
// share the cores, and DynamoDB Local, which serves near one core at most,
// spends more CPU a request when it shares them. So the floor a job is
// held to is measured here directly: workers that each do what an
// executor's poller and slot do for ten tasks (the tasks' messages sent in
// one SendMessageBatch, received in one ReceiveMessage of ten, each task
// claimed and committed through control.Service, the messages deleted in
// one DeleteMessageBatch), through the runner's own adapters (shared/queue
// over the SQS client sqswire picks; the store's client as the store
// probe builds it), at a few concurrencies on the warm emulators. The
// best level's tasks a second is the floor.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/sqswire"
)

// MixLevel is one level of the mix probe: workers at once for a while.
type MixLevel struct {
	Workers int
	Rate    float64 // tasks committed a second
	// Dynamo and SQS are the requests a task the level made to each.
	Dynamo, SQS float64
	// JavaCPU, MotoCPU and OwnCPU are DynamoDB Local's, moto's and this
	// process's CPU a task over the level (this process's: the control
	// plane's and the clients' share, and the idle runner beside them).
	JavaCPU, MotoCPU, OwnCPU time.Duration
	// Claim is a claim's mean time (one DynamoDB request) under the
	// level's load: a request's latency when the emulators are busy.
	Claim time.Duration
}

// Cores is the cores the three processes kept busy at the level.
func (l MixLevel) Cores() float64 {
	return l.Rate * (l.JavaCPU + l.MotoCPU + l.OwnCPU).Seconds()
}

// DynamoRate is the DynamoDB requests a second the level served.
func (l MixLevel) DynamoRate() float64 { return l.Rate * l.Dynamo }

// DynamoCPU and SQSCPU are each emulator's CPU a request at the level.
func (l MixLevel) DynamoCPU() time.Duration { return perRequest(l.JavaCPU, l.Dynamo) }
func (l MixLevel) SQSCPU() time.Duration    { return perRequest(l.MotoCPU, l.SQS) }

func perRequest(perTask time.Duration, requests float64) time.Duration {
	if requests <= 0 {
		return 0
	}
	return time.Duration(float64(perTask) / requests)
}

// Mix is the mix probe's levels and its best one: the emulators' floor
// for the no-op job.
type Mix struct {
	Levels []MixLevel
	Best   MixLevel
	// All is the levels together (their tasks, requests and CPU summed):
	// the emulators' prices when they share the cores. The best level's
	// alone would lean cheap, a cheaper level being likelier the best.
	All MixLevel
	// DynamoCores is the most cores DynamoDB Local kept busy at any level.
	DynamoCores float64
	Err         error
}

// Floor is the mix probe's floor in tasks a second: 0 where not measured.
func (m Mix) Floor() float64 { return m.Best.Rate }

// mixLevels are the mix probe's worker counts for a job of slots slots:
// half, all, twice and four times them (a job's slots are its claims in
// flight; its pollers, count flushes and materialization add more).
func mixLevels(slots int) []int {
	slots = max(slots, 2)
	return []int{slots / 2, slots, 2 * slots, 4 * slots}
}

// mixStep is each level's time: about 9 s for the probe with its set-up.
// The floor is the best level, and the best of four noisy levels leans
// high: at 1 s a level, levels of one probe swung by up to 15% with no
// level best from one probe to the next.
const mixStep = 2 * time.Second

// mixBatch is a worker's tasks a round: one SQS batch.
const mixBatch = 10

// probeMix runs the mix probe on a table of runnerTable's layout and a
// queue of its own.
func probeMix(ctx context.Context, cfg aws.Config, runnerTable string, workers []int) Mix {
	g, err := newRig(ctx, cfg, runnerTable, testdouble.NewQueue())
	if err != nil {
		return Mix{Err: err}
	}
	defer g.close(ctx)
	sq := sqs.NewFromConfig(cfg)
	made, err := sq.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("bench-mixprobe-%d", time.Now().UnixNano()))})
	if err != nil {
		return Mix{Err: fmt.Errorf("mix probe: create queue: %w", err)}
	}
	url := aws.ToString(made.QueueUrl)
	defer func() { _, _ = sq.DeleteQueue(context.WithoutCancel(ctx), &sqs.DeleteQueueInput{QueueUrl: &url}) }()
	api, err := sqswire.ForQueues(g.cfg, os.Getenv(sqswire.EnvClient))
	if err != nil {
		return Mix{Err: err}
	}
	q := queue.New(api)
	var sqsRequests, claims, claimTime atomic.Int64
	round := func(int) int {
		sends := make([]queue.Send, mixBatch)
		for i := range sends {
			ref, err := g.src.next(ctx)
			if err != nil {
				return 0
			}
			sends[i] = queue.Send{Body: ref.String()}
		}
		sqsRequests.Add(1)
		if q.SendBatch(ctx, url, sends) != nil {
			return 0
		}
		sqsRequests.Add(1)
		msgs, err := q.Receive(ctx, url, mixBatch, 0, 30*time.Second)
		if err != nil || len(msgs) == 0 {
			return 0
		}
		done := 0
		receipts := make([]string, 0, len(msgs))
		for _, m := range msgs {
			receipts = append(receipts, m.Receipt)
			ref, err := domain.ParseTaskRef(m.Body)
			if err != nil {
				continue
			}
			t := time.Now()
			cl, err := g.svc.Claim(ctx, ref)
			claimTime.Add(int64(time.Since(t)))
			claims.Add(1)
			if err != nil {
				continue
			}
			if g.svc.Commit(ctx, cl, control.CommitResult{WrittenHere: true}) == nil {
				done++
			}
		}
		sqsRequests.Add(1)
		_ = q.DeleteBatch(ctx, url, receipts)
		return done
	}
	// DynamoDB's work is counted in operations: a batch's statements each
	// (loadmodel.OpStat.Ops), which is what DynamoDB Local spends its CPU on.
	dynamoRequests := func() int { return g.rec.Snapshot().Totals().Ops["DynamoDB"] }
	// Warm the queue's connections and moto; DynamoDB Local's JVM is warm
	// from the store probe before it.
	_, _ = loop(probeWarm, max(workers[0], 1), round)
	var m Mix
	var sum levelSum
	for _, n := range workers {
		d0, s0, c0, ct0 := dynamoRequests(), sqsRequests.Load(), claims.Load(), claimTime.Load()
		j0, _ := EmulatorCPUOf(dynamoLocal)
		e0, _ := EmulatorCPU()
		o0 := CPUTime()
		start := time.Now()
		rate, _ := loop(mixStep, n, round)
		took := time.Since(start)
		j1, _ := EmulatorCPUOf(dynamoLocal)
		e1, _ := EmulatorCPU()
		o1 := CPUTime()
		tasks := rate * took.Seconds()
		if tasks <= 0 {
			continue
		}
		l := MixLevel{Workers: n, Rate: rate, Dynamo: float64(dynamoRequests()-d0) / tasks, SQS: float64(sqsRequests.Load()-s0) / tasks,
			JavaCPU: time.Duration(float64(j1-j0) / tasks), MotoCPU: time.Duration(float64(e1-e0-(j1-j0)) / tasks),
			OwnCPU: time.Duration(float64(o1-o0) / tasks)}
		if k := claims.Load() - c0; k > 0 {
			l.Claim = time.Duration((claimTime.Load() - ct0) / k)
		}
		m.Levels = append(m.Levels, l)
		if l.Rate > m.Best.Rate {
			m.Best = l
		}
		m.DynamoCores = max(m.DynamoCores, l.Rate*l.JavaCPU.Seconds())
		sum.add(l, tasks, took)
	}
	m.All = sum.level()
	_ = g.svc.FlushCounts(ctx)
	if len(m.Levels) == 0 {
		m.Err = fmt.Errorf("mix probe: no level committed a task")
	}
	return m
}

// levelSum adds levels up by their tasks.
type levelSum struct {
	tasks, dynamo, sqs float64
	java, moto, own    float64 // CPU seconds
	claim              float64 // claim seconds, weighted by tasks
	wall               time.Duration
}

func (s *levelSum) add(l MixLevel, tasks float64, took time.Duration) {
	s.tasks += tasks
	s.dynamo += l.Dynamo * tasks
	s.sqs += l.SQS * tasks
	s.java += l.JavaCPU.Seconds() * tasks
	s.moto += l.MotoCPU.Seconds() * tasks
	s.own += l.OwnCPU.Seconds() * tasks
	s.claim += l.Claim.Seconds() * tasks
	s.wall += took
}

func (s levelSum) level() MixLevel {
	if s.tasks <= 0 || s.wall <= 0 {
		return MixLevel{}
	}
	per := func(sec float64) time.Duration { return time.Duration(sec / s.tasks * float64(time.Second)) }
	return MixLevel{Rate: s.tasks / s.wall.Seconds(), Dynamo: s.dynamo / s.tasks, SQS: s.sqs / s.tasks,
		JavaCPU: per(s.java), MotoCPU: per(s.moto), OwnCPU: per(s.own), Claim: per(s.claim)}
}

// meanMix is the mean of two probes' best levels (before and after a
// job); either alone where the other measured nothing.
func meanMix(a, b Mix) Mix {
	switch {
	case a.Best.Rate <= 0:
		return Mix{Best: b.Best, Err: b.Err}
	case b.Best.Rate <= 0:
		return Mix{Best: a.Best, Err: a.Err}
	}
	return Mix{Best: meanLevel(a.Best, b.Best), All: meanLevel(a.All, b.All), DynamoCores: max(a.DynamoCores, b.DynamoCores)}
}

func meanLevel(x, y MixLevel) MixLevel {
	avg := func(p, q time.Duration) time.Duration { return (p + q) / 2 }
	return MixLevel{Workers: x.Workers, Rate: (x.Rate + y.Rate) / 2, Dynamo: (x.Dynamo + y.Dynamo) / 2, SQS: (x.SQS + y.SQS) / 2,
		JavaCPU: avg(x.JavaCPU, y.JavaCPU), MotoCPU: avg(x.MotoCPU, y.MotoCPU), OwnCPU: avg(x.OwnCPU, y.OwnCPU), Claim: avg(x.Claim, y.Claim)}
}

// Describe is the probe's levels on one line, the best marked.
func (m Mix) Describe() string {
	if m.Best.Rate <= 0 {
		return fmt.Sprintf("not measured (%v)", m.Err)
	}
	if len(m.Levels) == 0 {
		return fmt.Sprintf("mean of the best levels: %s; of all levels: %s; DynamoDB Local at most %.2f cores", m.Best.describe(), m.All.describe(), m.DynamoCores)
	}
	parts := make([]string, 0, len(m.Levels))
	for _, l := range m.Levels {
		s := fmt.Sprintf("%d workers: %s", l.Workers, l.describe())
		if l == m.Best {
			s += " (best)"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; DynamoDB Local at most %.2f cores", m.DynamoCores)
}

func (l MixLevel) describe() string {
	return fmt.Sprintf("%.0f tasks/s, %.2f DynamoDB and %.2f SQS requests a task, CPU a task DynamoDB Local %.0f µs (%.0f a request), moto %.0f µs (%.0f a request), this process %.0f µs, %.2f cores busy, a claim %.1f ms",
		l.Rate, l.Dynamo, l.SQS, us(l.JavaCPU), us(l.DynamoCPU()), us(l.MotoCPU), us(l.SQSCPU()), us(l.OwnCPU), l.Cores(), ms(l.Claim))
}

// MixDynamoCPU is DynamoDB Local's CPU a request of a job asking writes
// and reads a task: its writes at the mix probe's price over all its
// levels (the cores shared), its reads at the store probe's; 0 where the
// mix probe measured nothing.
func (p Emulator) MixDynamoCPU(writes, reads float64) time.Duration {
	w := p.Mix.All.DynamoCPU()
	if w <= 0 || writes+reads <= 0 {
		return w
	}
	r := p.Task.ReadCPU
	if r <= 0 {
		r = w
	}
	return time.Duration((writes*float64(w) + reads*float64(r)) / (writes + reads))
}
