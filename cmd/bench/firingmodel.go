package main

import (
	"cmp"
	"fmt"
	"math"
	"slices"
)

// AWS's documented limits the firing model holds a firing's measured cost
// against.
const (
	// A partition serves at most 1,000 write and 3,000 read units a
	// second (DynamoDB's partition limits; adaptive capacity may split a
	// hot key's items by sort key over time, not at once).
	awsPartitionWCU = 1000
	awsPartitionRCU = 3000
	// The default per-table on-demand throughput quota (adjustable).
	awsTableQuotaWCU = 40000
	awsTableQuotaRCU = 40000
	// A Lambda SQS event source on a standard queue: at most 1,000
	// batches at once, reached from 5 by up to 300 more a minute.
	awsESMMax      = 1000
	awsESMStart    = 5
	awsESMPerMin   = 300
	timerBatchSize = 100
	// timerHold is how long a timer consumer's invocation lasts per batch:
	// the lead it waits out (tuning.TimerLead, 5 s), a second of SQS's
	// rounding and the firing itself.
	timerHold = 6.5
	// The schedule index has 16 shards per minute (schedule.ShardCount).
	indexShards = 16
)

// firingModel is the model of 100,000 firings in one minute on AWS.
type firingModel struct {
	m firingMeasure
}

func awsFiringModel(m firingMeasure) firingModel { return firingModel{m: m} }

// firingLimit is one resource's ceiling in firings a second.
type firingLimit struct {
	what string
	rate float64
}

// limits are the ceilings, lowest first; perOwner adds the ones that hold
// when one owner has every schedule.
func (f firingModel) limits(perOwner bool) []firingLimit {
	m := f.m
	ls := []firingLimit{
		{"the table's write quota (40,000 units a second, adjustable)", awsTableQuotaWCU / m.wcu},
		{"the table's read quota (40,000 units a second, adjustable)", awsTableQuotaRCU / math.Max(m.rcu, 0.01)},
		{"the timer queue's Lambda consumers (1,000 batches of 100 at once)", awsESMMax * timerBatchSize / timerHold},
	}
	if perOwner {
		for k, u := range m.owner {
			if u.wcu > 0 {
				ls = append(ls, firingLimit{"the owner's partition key " + k + " (1,000 write units a second)", awsPartitionWCU / u.wcu})
			}
			if u.rcu > 0 {
				ls = append(ls, firingLimit{"the owner's partition key " + k + " (3,000 read units a second)", awsPartitionRCU / u.rcu})
			}
		}
	}
	slices.SortFunc(ls, func(a, b firingLimit) int { return cmp.Or(cmp.Compare(a.rate, b.rate), cmp.Compare(a.what, b.what)) })
	return ls
}

// esmReach is how long the timer queue's event source takes to run c
// batches at once from a cold start.
func esmReach(c float64) float64 {
	return math.Max(0, (c-awsESMStart)/awsESMPerMin*60)
}

func (f firingModel) print() {
	m := f.m
	const n, minute = 100000.0, 60.0
	rate := n / minute
	fmt.Printf("100,000 firings in a minute on AWS (model: this run's %.1f requests, %.1f write and %.1f read units a firing, against AWS's documented limits):\n",
		m.requests, m.wcu, m.rcu)
	consumers := rate * timerHold / timerBatchSize
	fmt.Printf("  spread over the minute (%.0f a second): %.0f write and %.0f read units a second; %.0f timer consumers at once (the event source reaches them in %.0f s from cold)\n",
		rate, rate*m.wcu, rate*m.rcu, consumers, esmReach(consumers))
	for _, perOwner := range []bool{false, true} {
		ls := f.limits(perOwner)
		who := "schedules spread over many owners"
		if perOwner {
			who = "all of one owner's schedules"
		}
		first := ls[0]
		verdict := "on time"
		if first.rate < rate {
			verdict = fmt.Sprintf("100,000 take %.0f s; past it, %s at %.0f a second", n/first.rate, ls[1].what, ls[1].rate)
		}
		fmt.Printf("  %s: limited by %s at %.0f firings a second: %s\n", who, first.what, first.rate, verdict)
	}
	// All at one instant: every consumer at once, and every job write in
	// the same seconds.
	burstConsumers := n / timerBatchSize
	ls := f.limits(false)
	fmt.Printf("  all 100,000 at one instant: %.0f consumers at once (the event source's ceiling is %d, reached in %.0f s from cold); the jobs written at %.0f a second take %.0f s: late by design, not within %s\n",
		burstConsumers, awsESMMax, esmReach(math.Min(burstConsumers, awsESMMax)), ls[0].rate, n/ls[0].rate, firingTarget)
	if m.indexWCU > 0 {
		fmt.Printf("  the schedule index's %d shards take %.0f write units a second each at that rate, under a partition's %d\n",
			indexShards, rate/indexShards*m.indexWCU, awsPartitionWCU)
	}
}
