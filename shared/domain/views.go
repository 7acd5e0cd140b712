package domain

import (
	"time"

	"github.com/batchwork/batchwork/shared/cost"
	sm "github.com/batchwork/batchwork/statemachine"
)

// JobSummary is a job as its owner's job list shows it: the fields the
// per-owner index item carries, kept in step with the job record by the
// transactions that create and end the job.
type JobSummary struct {
	ID      string
	Name    string
	State   sm.JobState
	Created time.Time
	Ended   time.Time
}

// AttemptEndKind says how an attempt that did not commit ended.
type AttemptEndKind string

const (
	// AttemptRetried: the task function returned an error and attempts were
	// left, so the task went back to READY after a backoff.
	AttemptRetried AttemptEndKind = "retried"
	// AttemptLeaseExpired: the holder stopped renewing its lease (it died,
	// hung or lost the network) and another claim or the sweep took the
	// task back.
	AttemptLeaseExpired AttemptEndKind = "lease_expired"
	// AttemptFailed: the last attempt failed (an error, or its lease
	// expired) and the task failed for good.
	AttemptFailed AttemptEndKind = "failed"
	// AttemptPermanent: the task function returned a permanent error
	// (batchwork.Permanent) and the task failed at once.
	AttemptPermanent AttemptEndKind = "permanent"
	// AttemptTimedOut: the attempt ran past its stage's timeout and was
	// cancelled; the task retried if attempts were left, else failed.
	AttemptTimedOut AttemptEndKind = "timed_out"
	// AttemptOutOfMemory: the attempt ran out of memory; the task retried
	// on the next executor size up if attempts were left, else failed.
	AttemptOutOfMemory AttemptEndKind = "out_of_memory"
	// AttemptTolerated: the task failed for good and its stage tolerated
	// the failure (toleratedFailures): the job goes on without its
	// partition.
	AttemptTolerated AttemptEndKind = "tolerated"
	// AttemptCancelled: the job's owner cancelled the task while the
	// attempt ran; the task failed (ClassCancelled).
	AttemptCancelled AttemptEndKind = "cancelled"
)

// AttemptEnd records how one attempt of a task ended without committing.
// There is at most one per attempt: the first writer wins.
type AttemptEnd struct {
	Ref     TaskRef
	Attempt int
	Kind    AttemptEndKind
	At      time.Time
	Err     string
	// Executor ran the attempt and Started is when it claimed it, when
	// known (the ending caller held the attempt's claim record).
	Executor string
	Started  time.Time
}

// TaskRow is a task record with the record counts its executor reported
// at commit.
type TaskRow struct {
	Task
	RecordsIn, RecordsOut int64
}

// StageCounters are a stage's aggregates, summed from its completion
// counter shards: never from its tasks.
type StageCounters struct {
	Progress
	// Failures counts attempts that ended without committing.
	Failures int
	// RecordsIn and RecordsOut sum what committed tasks reported.
	RecordsIn, RecordsOut int64
	// CopiesWon counts the stage's speculative copies that committed.
	CopiesWon int
	// Cost is what the stage's counts carried of the job's requests and
	// compute (shared/cost, shared/dynamo/cost.go).
	Cost cost.Counts
}

// RateSample is the last throughput sample of a running stage, kept on the
// stage record so that any status reader can smooth the rate further.
type RateSample struct {
	At        time.Time
	Committed int
	RecordsIn int64
	// TaskRate and RecordRate are exponential moving averages, per second;
	// negative when not known yet.
	TaskRate, RecordRate float64
}

// StageStats is a stage record with its aggregates and rate sample.
type StageStats struct {
	Stage
	Counters StageCounters
	Sample   *RateSample
}
