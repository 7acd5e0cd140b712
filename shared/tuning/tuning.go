// Package tuning derives the settings that must agree between the stack
// (infra/batchwork) and the runtime (executors, the local runner) from the
// job spec's lease and retry defaults, so each is written once.
//
// How the visibility timeout and the lease fit together: an SQS event
// source needs the queue's visibility timeout to be at least six times the
// function's timeout (AWS's guidance, so a batch that is retried after
// throttling is not redelivered while still running). That is the
// visibility of a message between its receipt and its claim only. Once a
// task is claimed, the executor sets the message's visibility to the
// stage's lease and its heartbeats extend both together, so from the claim
// on, "the visibility timeout is the lease" holds whatever the queue's
// default is. A message received but never claimed (an executor that died
// in between) comes back after the queue default; the sweep resends a READY
// task whose message is lost before then, and a duplicate message is
// harmless because the claim is a guarded write.
package tuning

import (
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

const (
	// Lease is the default task lease: a task not heartbeating for this
	// long is presumed lost and reclaimed.
	Lease = time.Duration(spec.DefaultLease)

	// CountLinger is how long an executor's commit count waits for others
	// before they go in one write per counter shard (control's count
	// batcher). A long-polling executor writes them sooner, before each
	// round of message deletes (DeleteRound): this only
	// bounds counts that no delete round takes. A Lambda executor writes
	// them before its invocation ends. Long enough that a round's counts
	// meet (dozens of tasks per write at a few hundred tasks a second),
	// short beside a stage's follow-up.
	CountLinger = 350 * time.Millisecond

	// CountBatchMax is how many pending counts an executor's count batcher
	// writes at once, before its linger or delete round: a bound on what a
	// process holds, far above a delete round's counts (a 300 ms round at a
	// few hundred tasks a second is about a hundred). A round's counts
	// fall on two or three counter shards however many they are
	// (dynamo.ShardOf: 64 neighbouring partitions a counter), so each
	// flush before the round writes those shards once more (a bound of 64
	// wrote them twice a round at the bench's rate). Waiting for the round
	// holds no count past its bound (the round, or the linger where no
	// round comes), so no stage completes later for it.
	CountBatchMax = 512

	// DeleteRound is how often a long-polling executor deletes its
	// finished tasks' messages, writing their batched counts first
	// (internal/executor/feed's deleter says why 300 ms).
	DeleteRound = 300 * time.Millisecond

	// MaxAttempts is the default number of attempts per task.
	MaxAttempts = spec.DefaultMaxAttempts

	// ExecutorTimeout is the Lambda executor's timeout: Lambda's maximum,
	// since a task runs inside one invocation (longer tasks belong on the
	// Fargate executor).
	ExecutorTimeout = 15 * time.Minute

	// EventSourceFactor is AWS's rule for SQS event sources: the queue's
	// visibility timeout is at least six times the function's timeout.
	EventSourceFactor = 6

	// QueueVisibility is the ready queues' default visibility timeout.
	QueueVisibility = EventSourceFactor * ExecutorTimeout

	// ReceiveVisibility is the visibility a long-polling executor asks for
	// when it receives a message: the held visibility, so the receive is
	// the message's first hide. An executor with a liveness record keeps
	// the message hidden from then on, renewing it only when it nears its
	// end (feed's renewSlack), so a task that ends within it costs no
	// visibility change; one without sets the lease when it claims. Short,
	// so a message that an executor received and never claimed (it died,
	// or its long poll outlived it; see ReceiveWait) comes back in two
	// seconds, as a dead holder's claimed one does; long enough for the
	// claim and a renewal under throttling. A message that comes back while
	// its claim is live is bounced harmlessly (ClaimHeld). SQS counts
	// whole seconds.
	ReceiveVisibility = HeldVisibility

	// UnclaimedVisibility is what an executor renews a message to, after
	// each beat, while its claim is still pending (a claim slowed by
	// retries): it outlasts a beat and the renewal's wait for it.
	UnclaimedVisibility = 2 * time.Second

	// ReceiveWait is a long-polling executor's wait. Short, because a
	// receive outlives its caller: SQS (and the emulator) goes on serving
	// the long poll of an executor that died, hands it the messages that
	// become visible meanwhile, and so hides them for ReceiveVisibility
	// with no one to claim them. A dead executor's own messages come back
	// HeldVisibility after its last renewal, after its polls have ended,
	// and another dead executor's poll steals at most ReceiveVisibility.
	// With a 20 s wait, chaos runs (a kill a second) saw a recovered task
	// stolen up to seven times in a row. The price is requests while idle:
	// a poll per queue every ReceiveWait (see docs/performance.md).
	ReceiveWait = time.Second

	// ExecutorBeat is how often an executor renews its liveness record
	// and the visibility of the messages it holds. Half a second, so that
	// recovery fits 5 s even when the executor that takes a dead one's task
	// over dies in turn: a 1 s beat (and 3 s promise) gave a p99 of 3 to
	// 6 s in make chaos, this one 4 s, for $0.0037 more per executor-hour.
	ExecutorBeat = 500 * time.Millisecond
	// ExecutorLease is how long past a renewal an executor promises to
	// live: beats may be late by up to ExecutorLease - ExecutorBeat before
	// others take its tasks over.
	ExecutorLease = 1750 * time.Millisecond
	// HeldVisibility is the visibility an executor keeps on the messages
	// of its running tasks, renewed right after each beat (SQS counts
	// whole seconds). It is the promise plus the skew margin that others
	// allow it (statemachine.LivenessSkew; a test holds them equal), so when
	// the executor dies its messages come back just as a takeover becomes
	// possible: the first receiver takes the task over, instead of
	// bouncing the message for another round.
	HeldVisibility = 2 * time.Second

	// DeliveriesPerAttempt bounds the receives one attempt can use: its
	// claim, a duplicate delivery bounced while the claim is held, and the
	// bounce that waits out the retry's backoff.
	DeliveriesPerAttempt = 3

	// MaxReceiveCount is the ready queues' redrive threshold. A message is
	// dead-lettered only after every default attempt used all its
	// deliveries, plus one. The sweep moves a live task's dead letter back,
	// so a job with more attempts is not cut short by this bound, nor by
	// the receives a poller spends on messages it received ahead of its
	// slots and gave back unclaimed (internal/executor/feed/ahead.go).
	MaxReceiveCount = DeliveriesPerAttempt*MaxAttempts + 1

	// MinMaxReceiveCount is AWS's recommended floor for an event source's
	// queue (at least 5, so throttled batches do not dead-letter).
	MinMaxReceiveCount = 5

	// DLQRetention keeps dead letters for the longest SQS allows, so the
	// sweep and operators have time to act.
	DLQRetention = 14 * 24 * time.Hour

	// APITimeout stays under API Gateway's 30 s integration limit.
	APITimeout = 29 * time.Second

	// ControlTimeout bounds the claim and commit functions: a few table
	// writes, and on the last commit of a stage a manifest and the
	// downstream stage's tasks.
	ControlTimeout = 60 * time.Second

	// SweepRate is the default schedule of the sweep.
	SweepRate = time.Minute

	// SweepTimeout keeps one sweep run within its period, so runs do not
	// pile up (overlapping runs are harmless, only wasteful).
	SweepTimeout = SweepRate

	// TimerLead is how long before its scheduled time a handed-off
	// firing's message is meant to arrive: the consumer reads the
	// schedule, then waits for the exact time (see control/timers.go).
	TimerLead = 5 * time.Second

	// TimerBatchSize and TimerBatchWindow shape the sweep's timer-queue
	// event source: a burst of firings at one instant reaches few
	// invocations (a batch is fired concurrently), and the window, well
	// under TimerLead less a second of delay rounding, never makes a
	// firing late.
	TimerBatchSize   = 100
	TimerBatchWindow = 2 * time.Second

	// ExecutorMaxConcurrency is the default cap on concurrent Lambda
	// executor invocations per ready queue (an event source mapping's
	// MaximumConcurrency, 2 to 1,000).
	ExecutorMaxConcurrency = 100

	// ExecutorBatchSize is how many messages one executor invocation
	// takes. Only one owner's tasks run in an invocation, concurrently; the
	// handler hands the other owners' messages back at once (see
	// feed.LambdaHandler), so batching saves invocations for an owner
	// with many tasks queued and never puts two owners in one process.
	ExecutorBatchSize = 10

	// ExecutorMemoryMB is the Lambda executor's memory. A task's input
	// split (spec.MaxSplitSize) and its buffered outputs (MaxTaskOutput)
	// are capped so that one task at both caps fits in it, in the worst
	// case about 830 MiB (TestOneTaskAtTheCapsFits).
	ExecutorMemoryMB = 1024

	// MaxTaskOutput caps the bytes one attempt's outputs (all partitions
	// together) may buffer in memory before they are published; a write
	// past it fails the attempt with a task error instead of the process.
	// As large as the largest split, so a task that passes its input
	// through (a filter, a re-partitioning map) is not refused.
	MaxTaskOutput = 256 << 20

	// UncommittedOutputExpiry is how long an object tagged as an
	// uncommitted attempt output lives: far longer than any lease, so only
	// abandoned attempts' outputs are ever expired.
	UncommittedOutputExpiry = 7 * 24 * time.Hour
)

// SoftMemoryLimit is the Go runtime's soft memory limit
// (debug.SetMemoryLimit) for a Lambda function of memoryMB: near it the
// collector runs harder instead of letting the heap grow to twice the live
// bytes, which with a task at the caps would pass the function's memory.
// A tenth is left for what the Go runtime does not count: the binary's
// own pages and the Lambda environment's.
func SoftMemoryLimit(memoryMB int64) int64 { return memoryMB << 20 * 9 / 10 }

// QueueVisibilityFor is the ready queues' visibility timeout for an
// executor function timeout, per the SQS event source rule.
func QueueVisibilityFor(executorTimeout time.Duration) time.Duration {
	return EventSourceFactor * executorTimeout
}

// Check reports whether a deployment's settings agree: the queue
// visibility covers the executor timeout per AWS's rule and fits SQS, the
// executor timeout fits Lambda, and the redrive count is at least AWS's
// floor and covers the default attempts. It returns nil or a description
// of the first disagreement; the construct and the template tests call it.
func Check(visibility, executorTimeout time.Duration, maxReceiveCount int) error {
	switch {
	case visibility < EventSourceFactor*executorTimeout:
		return fmt.Errorf("queue visibility %v is less than %d x the executor timeout %v", visibility, EventSourceFactor, executorTimeout)
	case executorTimeout > 15*time.Minute:
		return fmt.Errorf("executor timeout %v exceeds Lambda's 15 minutes", executorTimeout)
	case visibility > 12*time.Hour:
		return fmt.Errorf("queue visibility %v exceeds SQS's 12 hours", visibility)
	case maxReceiveCount < MinMaxReceiveCount:
		return fmt.Errorf("maxReceiveCount %d is below AWS's floor of %d for event sources", maxReceiveCount, MinMaxReceiveCount)
	case maxReceiveCount < MaxAttempts:
		return fmt.Errorf("maxReceiveCount %d does not cover the default %d attempts", maxReceiveCount, MaxAttempts)
	}
	return nil
}

// The tag that marks an attempt output as not (yet) committed: the data
// bucket's lifecycle rule expires tagged objects after
// UncommittedOutputExpiry.
const (
	UncommittedTagKey   = "batchwork-attempt"
	UncommittedTagValue = "uncommitted"
)

// OldestMessageAlarm is the age of the oldest ready message that raises
// the stack's alarm: well past a backoff bounce, short enough to notice
// executors that are missing.
const OldestMessageAlarm = time.Hour
