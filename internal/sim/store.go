package sim

import (
	"math"
	"time"
)

// Cost is what one unit of work (a task's claim, its commit, a chunk's
// marker) asks of a service: requests, which an emulator serves one at a
// time, and capacity units, which DynamoDB meters table-wide and on the
// hottest partition key.
type Cost struct {
	Requests       float64
	WRU, RRU       float64
	HotWRU, HotRRU float64
}

// Store is a service as the simulation sees it: DynamoDB (an emulator's
// Server or AWS's Table) or SQS (a Server).
type Store interface {
	// serve asks, at now, for n units of c. It answers how many were
	// served (the rest were throttled: the caller retries them after a
	// backoff) and when the served ones complete. Calls come in time
	// order.
	serve(now float64, n int, c Cost) (served int, done float64)
	// saturated names what limits the service at now, "" when nothing.
	saturated(now float64) string
	// throttles counts the requests refused so far, by what refused them.
	throttles() map[string]int
}

// Server is one process serving requests: when Rate > 0 it serves Rate
// requests a second one after another, first come first served, whoever
// sends them (an emulator: every chain, segment and executor shares its
// rate), and each request also takes Latency outside the queue (the
// client, the connection). With Rate 0 it has no throughput limit, only
// the latency (SQS standard queues on AWS).
type Server struct {
	Name    string
	Rate    float64
	Latency time.Duration
	free    float64 // when the requests accepted so far are all served
}

func (s *Server) serve(now float64, n int, c Cost) (int, float64) {
	return n, s.work(now, float64(n)*c.Requests)
}

// work queues r requests at now and returns when they are done.
func (s *Server) work(now, r float64) float64 {
	if s.Rate <= 0 {
		return now + s.Latency.Seconds()
	}
	s.free = max(now, s.free) + r/s.Rate
	return s.free + s.Latency.Seconds()
}

// rounds sends n requests, each cost of the server's mean request, conc
// at a time, and returns when the last is done: no sooner than the
// server's queue serves them all, nor than its rounds, each a request's
// latency and service time, take one after another.
func (s *Server) rounds(now float64, n, conc int, cost float64) float64 {
	if n == 0 {
		return now
	}
	step := s.Latency.Seconds()
	if s.Rate > 0 {
		step += cost / s.Rate
	}
	bound := now + float64((n+conc-1)/conc)*step
	if s.Rate <= 0 {
		return bound
	}
	return max(bound, s.work(now, float64(n)*cost))
}

func (s *Server) saturated(now float64) string {
	if s.Rate > 0 && s.free > now {
		return s.Name
	}
	return ""
}

func (s *Server) throttles() map[string]int { return nil }

// bucket is a token bucket: rate units a second, holding at most burst
// seconds of them.
type bucket struct {
	rate, burst, tokens, last float64
}

func newBucket(rate, burst float64) bucket {
	return bucket{rate: rate, burst: burst, tokens: rate * burst}
}

func (b *bucket) refill(now float64) {
	b.tokens = min(b.rate*b.burst, b.tokens+(now-b.last)*b.rate)
	b.last = now
}

// setRate changes the rate from now on.
func (b *bucket) setRate(now, rate float64) {
	b.refill(now)
	b.rate = rate
}

// Table is a DynamoDB on-demand table on AWS. Writes and reads are
// metered table-wide and on the table's hottest partition key:
//   - table-wide, a new table serves WarmWrite and WarmRead units a
//     second (its warm throughput: 4,000 and 12,000 unless set), and
//     twice its previous peak once that peak is DoublingAfter old (AWS:
//     traffic above double the previous peak within 30 minutes may be
//     throttled);
//   - one partition key never gets more than PartitionWrite and
//     PartitionRead units a second (1,000 and 3,000). Adaptive capacity
//     gives a hot partition up to that limit whatever its share of the
//     table, and split for heat cannot split a single key, so the
//     hottest key's load is held to it.
//
// A request over either limit is throttled and retried by the caller.
type Table struct {
	WarmWrite, WarmRead           float64
	DoublingAfter                 time.Duration
	PartitionWrite, PartitionRead float64
	Latency                       time.Duration

	w, r, hw, hr bucket
	started      bool
	perSecond    []float64 // write units consumed in each second
	peak         float64   // the highest perSecond before seen
	seen         int
	refused      map[string]int
	last         string // what refused the latest throttled request
	lastAt       float64
}

// Throttle causes, the keys of throttles.
const (
	ThrottleTableWrite     = "DynamoDB table write units"
	ThrottleTableRead      = "DynamoDB table read units"
	ThrottlePartitionWrite = "DynamoDB hottest partition key, writes"
	ThrottlePartitionRead  = "DynamoDB hottest partition key, reads"
)

func (t *Table) init() {
	// One second of burst: on-demand tables have no provisioned burst
	// credit to speak of.
	t.w, t.r = newBucket(t.WarmWrite, 1), newBucket(t.WarmRead, 1)
	t.hw, t.hr = newBucket(t.PartitionWrite, 1), newBucket(t.PartitionRead, 1)
	t.refused = map[string]int{}
	t.started = true
}

// allowance updates the table-wide write and read rates at now: the warm
// throughput, or twice the peak that is DoublingAfter old.
func (t *Table) allowance(now float64) {
	upto := int(now - t.DoublingAfter.Seconds())
	for ; t.seen < min(upto, len(t.perSecond)); t.seen++ {
		t.peak = max(t.peak, t.perSecond[t.seen])
	}
	w := max(t.WarmWrite, 2*t.peak)
	if w != t.w.rate {
		t.w.setRate(now, w)
		// Reads grow in proportion: DynamoDB scales the table's
		// partitions, which carry both.
		t.r.setRate(now, t.WarmRead*w/t.WarmWrite)
	}
}

func (t *Table) serve(now float64, n int, c Cost) (int, float64) {
	if !t.started {
		t.init()
	}
	t.allowance(now)
	f := 1.0
	cause := ""
	for _, x := range []struct {
		b    *bucket
		per  float64
		name string
	}{{&t.w, c.WRU, ThrottleTableWrite}, {&t.r, c.RRU, ThrottleTableRead},
		{&t.hw, c.HotWRU, ThrottlePartitionWrite}, {&t.hr, c.HotRRU, ThrottlePartitionRead}} {
		x.b.refill(now)
		if need := float64(n) * x.per; need > 0 && x.b.tokens < need {
			if g := max(0, x.b.tokens) / need; g < f {
				f, cause = g, x.name
			}
		}
	}
	served := n
	if f < 1 {
		served = int(math.Floor(f * float64(n)))
	}
	t.w.tokens -= float64(served) * c.WRU
	t.r.tokens -= float64(served) * c.RRU
	t.hw.tokens -= float64(served) * c.HotWRU
	t.hr.tokens -= float64(served) * c.HotRRU
	sec := int(now)
	for len(t.perSecond) <= sec {
		t.perSecond = append(t.perSecond, 0)
	}
	t.perSecond[sec] += float64(served) * c.WRU
	if served < n {
		t.refused[cause] += n - served
		t.last, t.lastAt = cause, now
	}
	return served, now + t.Latency.Seconds()
}

func (t *Table) saturated(now float64) string {
	if t.last != "" && now-t.lastAt < 1 {
		return t.last
	}
	return ""
}

func (t *Table) throttles() map[string]int { return t.refused }
