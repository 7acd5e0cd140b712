package sim

import (
	"errors"
	"math"
	"reflect"
	"testing"
	"time"
)

func near(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %v, want %v ± %v", what, got, want, tol)
	}
}

// A hot partition key is held to its limit: offered more, it serves the
// limit a second and throttles the rest.
func TestPartitionThrottlesAtItsLimit(t *testing.T) {
	for _, c := range []struct {
		name            string
		offered         int // requests a second, one unit each on the hot key
		read            bool
		served, refused int // over 10 seconds
	}{
		{"writes under the limit", 900, false, 9000, 0},
		{"writes at twice the limit", 2000, false, 10000, 10000},
		{"reads under the limit", 2500, true, 25000, 0},
		{"reads over the limit", 4000, true, 30000, 10000},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &Table{WarmWrite: 1e6, WarmRead: 1e6, DoublingAfter: DoublingAfter, PartitionWrite: PartitionWrite, PartitionRead: PartitionRead}
			cost := Cost{Requests: 1, HotWRU: 1}
			cause := ThrottlePartitionWrite
			if c.read {
				cost, cause = Cost{Requests: 1, HotRRU: 1}, ThrottlePartitionRead
			}
			served, refusedBefore := 0, 0
			// Requests spread over each second; the bucket starts full,
			// so the first 5 seconds are not counted.
			for ms := 10; ms < 15000; ms += 10 {
				if ms == 5000 {
					refusedBefore = tb.throttles()[cause]
				}
				n, _ := tb.serve(float64(ms)/1000, c.offered/100, cost)
				if ms >= 5000 {
					served += n
				}
			}
			refused := tb.throttles()[cause] - refusedBefore
			near(t, "served", float64(served), float64(c.served), float64(c.served)/50)
			near(t, "refused", float64(refused), float64(c.refused), float64(c.served)/50+1)
		})
	}
}

// A table serves its warm throughput, and twice a peak once the peak is
// DoublingAfter old; not before.
func TestTableWarmUpDoubling(t *testing.T) {
	for _, c := range []struct {
		name   string
		warm   float64
		before []float64 // write units offered each second for DoublingAfter+1 s
		then   float64   // units offered a second for 10 s afterwards
		served float64   // of those, a second
	}{
		{"a new table serves 4,000", NewTableWrite, nil, 8000, 4000},
		{"twice a peak of 4,000 after 30 minutes", NewTableWrite, []float64{4000}, 8000, 8000},
		{"not more than twice", NewTableWrite, []float64{4000}, 12000, 8000},
		{"a peak of 3,000 leaves the warm 4,000 (twice is 6,000)", NewTableWrite, []float64{3000}, 8000, 6000},
		{"warm throughput serves from the start", 24000, nil, 23600, 23600},
	} {
		t.Run(c.name, func(t *testing.T) {
			tb := &Table{WarmWrite: c.warm, WarmRead: NewTableRead, DoublingAfter: DoublingAfter, PartitionWrite: 1e9, PartitionRead: 1e9}
			now := 0.0
			step := 0.01
			offer := func(rate float64, secs int) int {
				served := 0
				for i := 0; i < secs*100; i++ {
					now += step
					n, _ := tb.serve(now, int(rate*step), Cost{Requests: 1, WRU: 1})
					served += n
				}
				return served
			}
			for _, r := range c.before {
				offer(r, int(DoublingAfter.Seconds())+1)
			}
			offer(c.then, 2) // the bucket's first, full second
			near(t, "served a second", float64(offer(c.then, 10))/10, c.served, c.served/50)
		})
	}
}

func TestLambdaConcurrencyRamp(t *testing.T) {
	base := Lambda{BatchSize: 10, MaxConcurrency: 1000, ESMInitial: ESMInitial, ESMPerMinute: ESMPerMinute, ScalePer10s: FunctionPer10s}
	for _, c := range []struct {
		name  string
		l     func(Lambda) Lambda
		since float64
		want  int
		why   string
	}{
		{"the event source starts at 5", nil, 0, 5, LimitESMRamp},
		{"and adds 300 a minute", nil, 60, 305, LimitESMRamp},
		{"half a minute: 150 more", nil, 30, 155, LimitESMRamp},
		{"up to MaximumConcurrency", nil, 600, 1000, LimitMaxConcurrency},
		{"reserved concurrency caps it", func(l Lambda) Lambda { l.Reserved = 200; return l }, 600, 200, LimitReserved},
		{"the account's concurrency caps it", func(l Lambda) Lambda { l.AccountLimit = 300; return l }, 600, 300, LimitAccount},
		{"the function adds 1,000 every 10 s", func(l Lambda) Lambda { l.ESMInitial, l.MaxConcurrency = 1e6, 0; return l }, 0, 1000, LimitFunctionRamp},
		{"2,000 after 10 s", func(l Lambda) Lambda { l.ESMInitial, l.MaxConcurrency = 1e6, 0; return l }, 10, 2000, LimitFunctionRamp},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := base
			if c.l != nil {
				l = c.l(l)
			}
			if n, why := l.Limit(c.since); n != c.want || why != c.why {
				t.Errorf("Limit(%v) = %d, %s; want %d, %s", c.since, n, why, c.want, c.why)
			}
		})
	}
}

func TestSQSBatchArithmetic(t *testing.T) {
	for _, c := range []struct {
		name      string
		s         Server
		messages  int
		conc      int
		wantAfter float64
	}{
		{"100 messages are 10 batches: 2 rounds of 8 at 10 ms", Server{Latency: 10 * time.Millisecond}, 100, 8, 0.020},
		{"80 messages: one round", Server{Latency: 10 * time.Millisecond}, 80, 8, 0.010},
		{"81 messages: 9 batches, 2 rounds", Server{Latency: 10 * time.Millisecond}, 81, 8, 0.020},
		{"an emulator serves the 10 batches one after another", Server{Rate: 400}, 100, 8, 10.0 / 400},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s
			near(t, "done", s.rounds(1, (c.messages+9)/10, c.conc, 1)-1, c.wantAfter, 1e-9)
		})
	}
}

// An emulator's server is first come, first served: work queues behind
// work.
func TestServerQueues(t *testing.T) {
	s := Server{Name: "emulator", Rate: 100}
	if _, d := s.serve(0, 10, Cost{Requests: 1}); d != 0.1 {
		t.Errorf("first 10 requests done at %v, want 0.1", d)
	}
	if _, d := s.serve(0.05, 1, Cost{Requests: 2}); math.Abs(d-0.12) > 1e-9 {
		t.Errorf("next request done at %v, want 0.12 (behind the first)", d)
	}
	if s.saturated(0.11) == "" || s.saturated(0.2) != "" {
		t.Error("saturated while work is queued, and only then")
	}
}

// An emulator is one server that every chain shares: chains that keep it
// busy split its rate (two take twice as long as one), while chains held
// back by a request's latency overlap (two take as long as one) until
// together they fill it.
func TestSharedServerChains(t *testing.T) {
	for _, c := range []struct {
		name    string
		rate    float64
		latency time.Duration
		chains  int
		want    float64 // seconds until every chain's 100 requests are done
	}{
		{"server-bound: one chain", 100, 0, 1, 1},
		{"server-bound: two chains take twice as long", 100, 0, 2, 2},
		{"latency-bound: one chain", 1e4, 10 * time.Millisecond, 1, 1.01},
		{"latency-bound: two chains take as long", 1e4, 10 * time.Millisecond, 2, 1.0101},
		{"latency equal to service: two chains interleave", 100, 10 * time.Millisecond, 2, 2.01},
		{"latency equal to service: four chains fill the server", 100, 10 * time.Millisecond, 4, 4.01},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Server{Name: "emulator", Rate: c.rate, Latency: c.latency}
			// Each chain sends its next request when its last is done;
			// the server sees the requests in time order.
			next := make([]float64, c.chains)
			left := make([]int, c.chains)
			for i := range left {
				left[i] = 100
			}
			end := 0.0
			for {
				k := -1
				for i := range next {
					if left[i] > 0 && (k < 0 || next[i] < next[k]) {
						k = i
					}
				}
				if k < 0 {
					break
				}
				_, done := s.serve(next[k], 1, Cost{Requests: 1})
				next[k], left[k], end = done, left[k]-1, max(end, done)
			}
			near(t, "done", end, c.want, 1e-6)
		})
	}
}

// Materialization's chains on an emulator: parallel chains (segments)
// queue a stage no faster than the emulator serves their sends, and
// faster only while each is held back by its own requests' latency.
func TestEmulatorMaterializationChains(t *testing.T) {
	for _, c := range []struct {
		name    string
		m       Measured
		workers int
		want    float64 // seconds to the last of 2,000 tasks queued
	}{
		// 20 chunks of 10 SendMessageBatch requests at 100 a second.
		{"SQS-bound, one chain", Measured{DynamoRate: 1e9, SQSRate: 100}, 1, 2.0},
		{"SQS-bound, two chains share the server", Measured{DynamoRate: 1e9, SQSRate: 100}, 2, 2.0},
		// moto spends 1.2 of its mean request on a send (SendShare).
		{"SQS-bound, a send dearer than the mean", Measured{DynamoRate: 1e9, SQSRate: 100, SendShare: 1.2}, 1, 2.4},
		// A chunk: the marker (5 ms), 2 rounds of sends (10 ms each),
		// the count (5 ms): 30 ms, 20 chunks one after another.
		{"latency-bound, one chain", Measured{DynamoRate: 1e9, SQSRate: 1e9, DynamoLatency: 5 * time.Millisecond, SQSLatency: 10 * time.Millisecond}, 1, 0.6},
		{"latency-bound, two chains halve it", Measured{DynamoRate: 1e9, SQSRate: 1e9, DynamoLatency: 5 * time.Millisecond, SQSLatency: 10 * time.Millisecond}, 2, 0.3},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Tasks ask nothing of the services besides their
			// claim and commit, one request each.
			cfg := Emulator([]int{2000}, Profile{DynamoRequests: 2.02, WRU: 2.02}, c.m, 4, 1)
			cfg.Materialize.Workers = c.workers
			r, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			near(t, "queued", r.Queued.Seconds(), c.want, 0.01)
		})
	}
}

// rateCase is a 20,000-task emulator run's expected rate and binding limit.
type rateCase struct {
	name  string
	m     Measured
	rate  float64 // tasks a second
	limit string
}

func testRates(t *testing.T, p Profile, cases []rateCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := Run(Emulator([]int{20000}, p, c.m, 64, 1))
			if err != nil {
				t.Fatal(err)
			}
			near(t, "rate", r.Rate, c.rate, c.rate/50)
			if g, ok := r.Binding(1e6); !ok || g.Limit != c.limit {
				t.Errorf("binding %+v: want %s", g, c.limit)
			}
		})
	}
}

// On one machine the emulators and the runner share the cores: a task
// that asks more CPU than the cores serve is held to them, whatever the
// emulator's own ceiling; with the cores left out, only the ceiling holds.
func TestEmulatorSharedCores(t *testing.T) {
	p := Profile{DynamoRequests: 2.02, WRU: 2.02}
	testRates(t, p, []rateCase{
		// 2.02 requests at 1,000 a second: 495 tasks a second.
		{"no cores modelled: the emulator's ceiling", Measured{DynamoRate: 1000, SQSRate: 1e6}, 495, "DynamoDB (emulator)"},
		// 2 cores, 2.02 x 1 ms of DynamoDB and 3 ms of the runner a
		// task: 2 / 5.02 ms, 398 tasks a second.
		{"the cores bind first", Measured{DynamoRate: 1000, SQSRate: 1e6, Cores: 2, DynamoCPU: time.Millisecond, RunnerCPU: 3 * time.Millisecond}, 398, LimitCores},
		// The emulators' idle half a core leaves 1.5 to the tasks:
		// 1.5 / 5.02 ms, 299 tasks a second.
		{"the emulators' idle CPU takes its share", Measured{DynamoRate: 1000, SQSRate: 1e6, Cores: 2, IdleCores: 0.5, DynamoCPU: time.Millisecond,
			RunnerCPU: 3 * time.Millisecond}, 299, LimitCores},
		// The same work on 4 cores: the ceiling again.
		{"enough cores: the ceiling binds", Measured{DynamoRate: 1000, SQSRate: 1e6, Cores: 4, DynamoCPU: time.Millisecond, RunnerCPU: 3 * time.Millisecond}, 495, "DynamoDB (emulator)"},
	})
}

// DynamoDB Local serializes its writes: its ceiling is the writes a
// second the mix probe served (the emulators and the runner sharing the
// cores), its reads served beside them; moto's one core at its CPU a
// request there; each probe's plateau probed alone where the mix probe
// measured nothing.
func TestEmulatorCeilingFromTheMixProbe(t *testing.T) {
	writes := Profile{DynamoRequests: 2.02, WRU: 2.02, SQSRequests: 0.6}
	testRates(t, writes, []rateCase{
		// 2.02 requests at 1,000 a second: 495 tasks a second.
		{"no mix probe: the plateau", Measured{DynamoRate: 1000, SQSRate: 1e6}, 495, "DynamoDB (emulator)"},
		// 500 writes a second: 248 tasks a second, below the plateau.
		{"the mix probe's writes bind below the plateau", Measured{DynamoRate: 1000, SQSRate: 1e6, MixDynamoRate: 500}, 248,
			"DynamoDB (emulator)"},
		// 1,500 a second in place of the plateau: 743 tasks a second.
		{"the mix probe's rate replaces the plateau", Measured{DynamoRate: 1000, SQSRate: 1e6, MixDynamoRate: 1500}, 743,
			"DynamoDB (emulator)"},
		// moto: 100 requests a second, 0.6 a task (the chunks' sends
		// among them): 167 tasks a second, whatever its CPU a request.
		{"no mix probe: moto at its plateau", Measured{DynamoRate: 1e6, SQSRate: 100, SQSCPU: 20 * time.Millisecond}, 167, "SQS (emulator)"},
		// One core at the mix probe's 10 ms a request: 100 a second, in
		// place of its plateau probed alone.
		{"moto one core at the mix probe's price", Measured{DynamoRate: 1e6, SQSRate: 1000, MixSQSCPU: 10 * time.Millisecond}, 167,
			"SQS (emulator)"},
	})
	// A job whose 2.5 requests a task are 2 writes and half a read: the
	// writes at 500 a second, 250 tasks a second (its reads queued with
	// them would hold it to 200).
	reads := Profile{DynamoRequests: 2.5, DynamoReads: 0.5, WRU: 2, RRU: 0.5}
	testRates(t, reads, []rateCase{
		{"reads served beside the writes", Measured{DynamoRate: 1000, SQSRate: 1e6, MixDynamoRate: 500}, 250, "DynamoDB (emulator)"},
		// 1,000 requests of the mix a second: 400 tasks a second.
		{"no mix probe: reads and writes at the plateau", Measured{DynamoRate: 1000, SQSRate: 1e6}, 400, "DynamoDB (emulator)"},
	})
}

// A stage completes when its last count is written: the executors'
// counts linger up to StageLinger from the first of a batch, or until a
// batch is full.
func TestEmulatorStageLinger(t *testing.T) {
	p := Profile{DynamoRequests: 2.02, WRU: 2.02}
	for _, c := range []struct {
		name   string
		stages []int
		dynamo float64       // requests a second
		rounds time.Duration // CountRounds (0: none)
		lo, hi float64       // the linger's cost, seconds
	}{
		// One task: its count waits the whole linger.
		{"one task", []int{1}, 1000, 0, 0.35, 0.35},
		// Two stages of one: a linger each.
		{"two stages of one task", []int{1, 1}, 1000, 0, 0.70, 0.70},
		// 1,000 tasks at 49.5 a second: batches of 17, the last one
		// written up to a linger after the last commit.
		{"a stage's last batch", []int{1000}, 100, 0, 0, 0.35},
		// The throughput job's shape: a stage's last batch, then the
		// fan-in task's whole linger.
		{"fan-out and fan-in", []int{1000, 1}, 100, 0, 0.35, 0.70},
		// A delete round every 300 ms writes a lone count at the next
		// round, before its linger ends.
		{"one task, delete rounds", []int{1}, 1000, 300 * time.Millisecond, 1e-3, 0.30},
		// Rounds rarer than the linger: the linger writes it.
		{"one task, rare rounds", []int{1}, 1000, time.Hour, 0.35, 0.35},
		{"fan-out and fan-in, delete rounds", []int{1000, 1}, 100, 300 * time.Millisecond, 1e-3, 0.60},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A config's servers keep their queues: one config a run.
			cfg := func() Config {
				cfg := Emulator(c.stages, p, Measured{DynamoRate: c.dynamo, SQSRate: 1e6}, 16, 1)
				cfg.CountRounds = c.rounds
				return cfg
			}
			lingered, err := Run(cfg())
			if err != nil {
				t.Fatal(err)
			}
			at0 := cfg()
			at0.StageLinger = 0
			at, err := Run(at0)
			if err != nil {
				t.Fatal(err)
			}
			d := (lingered.Finished - at.Finished).Seconds()
			if d < c.lo-1e-6 || d > c.hi+1e-6 {
				t.Errorf("the linger added %.3fs: want %.2f to %.2f", d, c.lo, c.hi)
			}
		})
	}
}

func prices() Prices {
	return Prices{DynamoWRU: 0.625, DynamoRRU: 0.125, SQSRequest: 0.40, S3Put: 0.005, S3Get: 0.0004, LambdaRequest: 0.20, LambdaGBSecond: 0.0000133334}
}

// Small cases whose answers are computed by hand.
func TestRunKnownCases(t *testing.T) {
	t.Run("an emulator's DynamoDB bounds the rate", func(t *testing.T) {
		// 1,000 tasks of 2.02 requests each (claim 1, commit 1, and the
		// 10 chunks' 2 each) at 100 requests a second: 20.2 s.
		p := Profile{DynamoRequests: 2.02, WRU: 2.02}
		cfg := Emulator([]int{1000}, p, Measured{DynamoRate: 100, SQSRate: 1e6}, 16, 1)
		cfg.StageLinger = 0 // each count written at once
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "finished", r.Finished.Seconds(), 20.2, 0.05)
		if len(r.Segments) == 0 || r.Segments[0].Limit != "DynamoDB (emulator)" {
			t.Errorf("segments %+v: want the emulator's DynamoDB first", r.Segments)
		}
	})
	t.Run("Lambda: two rounds of five cold, then warm, invocations", func(t *testing.T) {
		// One chunk of 100 tasks: marker 5 ms, 10 batches in 2 rounds
		// of 10 ms: visible at 25 ms. The event source allows 5
		// invocations of 10: receive 10 ms, cold start 150 ms, claim
		// 5 ms, run 1 s, commit 5 ms: done at 1.195 s; each ends 60 ms
		// later (linger, delete), at 1.255 s. The next 5 start warm:
		// 10 + 5 + 1,000 + 5 ms: the last task commits at 2.275 s.
		p := Profile{DynamoRequests: 2.02, WRU: 2.02, SQSRequests: 0.5, SQSBilled: 0.5}
		cfg := AWS([]int{100}, time.Second, p, CapacityFor(1000, p), prices(), 1)
		cfg.Lambda.ESMPerMinute = 1 // stays at 5 for a minute
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "queued", r.Queued.Seconds(), 0.025, 1e-6)
		near(t, "finished", r.Finished.Seconds(), 2.275, 1e-6)
		if r.Invocations != 10 || r.ColdStarts != 5 || r.PeakConcurrency != 5 {
			t.Errorf("invocations %d, cold starts %d, peak %d; want 10, 5, 5", r.Invocations, r.ColdStarts, r.PeakConcurrency)
		}
		// 5 × 1.23 s + 5 × 1.08 s billed; 10 invocations.
		near(t, "Lambda seconds", r.LambdaSeconds, 11.55, 1e-6)
		wantLambda := 10*0.20/1e6 + 11.55*1*0.0000133334
		near(t, "Lambda cost", r.Cost.Lambda, wantLambda, 1e-12)
		near(t, "DynamoDB cost", r.Cost.DynamoDB, 100*2.02*0.625/1e6, 1e-12)
		near(t, "SQS cost", r.Cost.SQS, 100*0.5*0.40/1e6, 1e-12)
		if g, ok := r.Binding(1000); !ok || g.Limit != LimitESMRamp {
			t.Errorf("binding %+v, %v: want the event source ramp", g, ok)
		}
	})
	t.Run("table write units throttle, and bound the rate", func(t *testing.T) {
		// 4 WRU a task on a new table's 4,000: 1,000 tasks a second.
		p := Profile{DynamoRequests: 3, WRU: 4}
		cfg := AWS([]int{60000}, 0, p, Capacity{WarmWrite: NewTableWrite, WarmRead: NewTableRead, MaxConcurrency: 1000}, prices(), 1)
		cfg.Lambda.ESMInitial = 1000
		cfg.Materialize.Workers = 8
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "rate", r.Rate, 1000, 80)
		if r.Throttles[ThrottleTableWrite] == 0 {
			t.Errorf("throttles %v: want table write throttles", r.Throttles)
		}
		if g, ok := r.Binding(10000); !ok || g.Limit != ThrottleTableWrite {
			t.Errorf("binding %+v: want %s", g, ThrottleTableWrite)
		}
	})
	t.Run("stages run one after another", func(t *testing.T) {
		p := Profile{DynamoRequests: 2.02, WRU: 2.02}
		cfg1, cfg2 := Emulator([]int{1000}, p, Measured{DynamoRate: 100, SQSRate: 1e6}, 16, 1), Emulator([]int{1000, 1}, p, Measured{DynamoRate: 100, SQSRate: 1e6}, 16, 1)
		cfg1.StageLinger, cfg2.StageLinger = 0, 0 // each count written at once
		one, _ := Run(cfg1)
		two, err := Run(cfg2)
		if err != nil {
			t.Fatal(err)
		}
		// The second stage's one task: its chunk's 2 requests, claim and
		// commit (1.02 requests: the profile's rest), at 100 a second.
		near(t, "second stage", (two.Finished - one.Finished).Seconds(), 0.0402, 0.001)
	})
}

func TestRunIsDeterministic(t *testing.T) {
	p := Profile{DynamoRequests: 3, WRU: 4, SQSRequests: 0.5}
	run := func(seed uint64) Result {
		cfg := AWS([]int{20000}, 0, p, Capacity{WarmWrite: NewTableWrite, WarmRead: NewTableRead, MaxConcurrency: 1000}, prices(), seed)
		cfg.Lambda.ESMInitial = 1000
		cfg.Materialize.Workers = 8
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a, b := run(7), run(7)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs with seed 7 differ:\n%+v\n%+v", a, b)
	}
}

func TestConfigErrors(t *testing.T) {
	p := Profile{DynamoRequests: 2, WRU: 2}
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"no stages", func(c *Config) { c.Stages = nil }},
		{"an empty stage", func(c *Config) { c.Stages = []int{10, 0} }},
		{"both executors", func(c *Config) { c.Lambda = &Lambda{} }},
		{"no executors", func(c *Config) { c.Slots = nil }},
		{"no chunk size", func(c *Config) { c.Materialize.ChunkTasks = 0 }},
		{"no slots", func(c *Config) { c.Slots.Count = 0 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Emulator([]int{10}, p, Measured{DynamoRate: 100, SQSRate: 100}, 4, 1)
			c.mod(&cfg)
			if _, err := Run(cfg); !errors.Is(err, errConfig) {
				t.Errorf("Run: %v, want a config error", err)
			}
		})
	}
}

// A million tasks simulate in seconds (the bench prints the prediction on
// every run).
func BenchmarkMillionTasks(b *testing.B) {
	p := Profile{DynamoRequests: 2.34, WRU: 2.36, RRU: 0.16, SQSRequests: 0.46, HotWRU: 0.02}
	for b.Loop() {
		if _, err := Run(AWS([]int{1000000}, 0, p, CapacityFor(10000, p), prices(), 1)); err != nil {
			b.Fatal(err)
		}
	}
}

// While a stage's chains keep an emulator's SQS busy with their sends,
// the executors' receives wait their turn behind them (one receive in
// flight, as the runner's poller keeps): the chains queue at nearly the
// sends' own rate, and the executors run few tasks meanwhile. Were the
// executors served first, as fast as DynamoDB lets them (here without
// limit), the chains would get what the executors left.
func TestEmulatorReceivesWaitBehindSends(t *testing.T) {
	// 20,000 tasks are 2,000 sends: 20 s of an SQS serving 100 a second.
	r, err := Run(Emulator([]int{20000}, Profile{DynamoRequests: 2.02, WRU: 2.02, SQSRequests: 0.32}, Measured{DynamoRate: 1e9, SQSRate: 100}, 32, 1))
	if err != nil {
		t.Fatal(err)
	}
	if q := r.Queued.Seconds(); q < 20 || q > 25 {
		t.Errorf("last task queued at %.1fs: want 20 to 25 s", q)
	}
	if r.DoneByQueued > 2500 {
		t.Errorf("%d tasks committed by the last queued: want at most 2,500", r.DoneByQueued)
	}
}
