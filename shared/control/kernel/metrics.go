package kernel

import (
	"context"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// Metrics receives the control plane's decisions as they happen, for
// Batchwork's own metrics (internal/metrics writes them as CloudWatch
// EMF). Service.Metrics nil: nothing is recorded. Implementations must be
// cheap and never fail: they aggregate in memory.
type Metrics interface {
	// TaskClaimed: a claim was granted.
	TaskClaimed(p spec.Priority)
	// TaskCommitted: an attempt committed, duration after its claim (0
	// when unknown: a remote executor's commit), the commit taking commit.
	TaskCommitted(p spec.Priority, duration, commit time.Duration)
	// TaskRetried: an attempt failed and the task will run again.
	TaskRetried(p spec.Priority)
	// TaskFailed: a task failed for good (its last attempt failed or its
	// lease expired).
	TaskFailed(p spec.Priority)
	// JobFailed: a job ended FAILED (a task failed for good, a deadline).
	JobFailed()
	// Repaired: the sweep made n repairs of a kind.
	Repaired(kind Repair, n int)
}

// Repair is a kind of sweep repair: the Kind dimension of the
// SweepRepairs metric, so a small fixed set (Repairs).
type Repair string

// The sweep's repairs.
const (
	// RepairLostMessage: a READY task waited unclaimed too long; its
	// message was sent again.
	RepairLostMessage Repair = "LostMessage"
	// RepairBackoffDue: a retry still in its backoff was sent a message
	// delayed to the backoff's end (a backoff longer than its message was
	// hidden for, or a message lost during it).
	RepairBackoffDue Repair = "BackoffDue"
	// RepairExpiredLease: a claim's lease ran out (the executor died or
	// hung); the task was released, or failed on its last attempt.
	RepairExpiredLease Repair = "ExpiredLease"
	// RepairInterruptedStep: a stage step its starter or committer should
	// have done (start, materialize, follow-up) was done by the sweep.
	RepairInterruptedStep Repair = "InterruptedStep"
	// RepairDeadLetter: a dead-lettered message was handled (sent back to
	// its ready queue, or dropped for a finished task).
	RepairDeadLetter Repair = "DeadLetter"
	// RepairScheduleFired: the sweep fired a due schedule itself.
	RepairScheduleFired Repair = "ScheduleFired"
	// RepairFailurePropagated: a failed task's stage and job were failed.
	RepairFailurePropagated Repair = "FailurePropagated"
	// RepairCancelled: a task of an ended job was cancelled.
	RepairCancelled Repair = "Cancelled"
	// RepairDeadline: a job was failed by its deadline.
	RepairDeadline Repair = "Deadline"
)

// Repairs are every Repair kind.
var Repairs = []Repair{RepairLostMessage, RepairBackoffDue, RepairExpiredLease, RepairInterruptedStep,
	RepairDeadLetter, RepairScheduleFired, RepairFailurePropagated, RepairCancelled, RepairDeadline}

// noMetrics records nothing.
type noMetrics struct{}

func (noMetrics) TaskClaimed(spec.Priority)                                 {}
func (noMetrics) TaskCommitted(spec.Priority, time.Duration, time.Duration) {}
func (noMetrics) TaskRetried(spec.Priority)                                 {}
func (noMetrics) TaskFailed(spec.Priority)                                  {}
func (noMetrics) JobFailed()                                                {}
func (noMetrics) Repaired(Repair, int)                                      {}

// Meter is s.Metrics, or one that records nothing.
func (s *Kernel) Meter() Metrics {
	if s.Metrics == nil {
		return noMetrics{}
	}
	return s.Metrics
}

// TaskPriority is the priority class of a task's stage: the Priority
// dimension. Without the spec (not cached, unreadable) it is normal.
func (s *Kernel) TaskPriority(ctx context.Context, sp *spec.Job, ref domain.TaskRef) spec.Priority {
	if sp == nil {
		if s.Metrics == nil {
			return spec.PriorityNormal
		}
		var err error
		if sp, err = s.CachedSpec(ctx, ref.Job); err != nil {
			return spec.PriorityNormal
		}
	}
	if ref.Stage >= len(sp.Stages) {
		return spec.PriorityNormal
	}
	return sp.StagePriority(ref.Stage)
}

// SweepRepairs reports a sweep run's repairs, but those of a READY task
// Resent (lost message or backoff due), which sweepTask reports itself.
func (s *Kernel) SweepRepairs(c SweepCounts) {
	m := s.Meter()
	m.Repaired(RepairExpiredLease, c.Expired+c.Exhausted)
	m.Repaired(RepairInterruptedStep, c.StagesFixed)
	m.Repaired(RepairDeadLetter, c.DeadLettered)
	m.Repaired(RepairScheduleFired, c.Fired)
	m.Repaired(RepairFailurePropagated, c.Failures)
	m.Repaired(RepairCancelled, c.Cancelled)
	m.Repaired(RepairDeadline, c.Deadlines)
}

// Resent is the kind of repair a READY task's Resend is: one for a retry
// whose backoff has not run out (it is sent with the rest as its delay:
// a backoff longer than the message could be hidden for), or a lost
// message (or one waiting behind a backlog).
func Resent(t domain.Task, now time.Time) Repair {
	if t.NotBefore.After(now) {
		return RepairBackoffDue
	}
	return RepairLostMessage
}

// CountCommit records a commit that started at start: its latency, and
// the attempt's duration from its claim when the claim says when (a
// remote executor's commit does not).
func (s *Kernel) CountCommit(ctx context.Context, c Claim, start time.Time) {
	if s.Metrics == nil {
		return
	}
	var duration time.Duration
	if !c.Task.Updated.IsZero() {
		duration = s.Now().Sub(c.Task.Updated)
	}
	s.Metrics.TaskCommitted(s.TaskPriority(ctx, c.Spec, c.Task.Ref), duration, time.Since(start))
}
