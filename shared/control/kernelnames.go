package control

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/spec"
)

// The ports, limits, metrics, events and routing live in kernel; these
// names keep their callers' spelling.
type (
	Store          = kernel.Store
	TaskCatalog    = kernel.TaskCatalog
	Queue          = kernel.Queue
	Blob           = kernel.Blob
	Queues         = kernel.Queues
	Claim          = kernel.Claim
	SweepCounts    = kernel.SweepCounts
	Metrics        = kernel.Metrics
	Repair         = kernel.Repair
	EventPublisher = kernel.EventPublisher
	OverLimitError = kernel.OverLimitError
	OwnerLimits    = kernel.OwnerLimits
)

// Repairs the sweep makes, by kind (kernel.Repair).
const (
	RepairLostMessage       = kernel.RepairLostMessage
	RepairBackoffDue        = kernel.RepairBackoffDue
	RepairExpiredLease      = kernel.RepairExpiredLease
	RepairInterruptedStep   = kernel.RepairInterruptedStep
	RepairDeadLetter        = kernel.RepairDeadLetter
	RepairScheduleFired     = kernel.RepairScheduleFired
	RepairFailurePropagated = kernel.RepairFailurePropagated
	RepairCancelled         = kernel.RepairCancelled
	RepairDeadline          = kernel.RepairDeadline
)

// Limits and bounds (kernel).
const (
	DefaultJobStateTTL   = kernel.DefaultJobStateTTL
	MaxErrorLen          = kernel.MaxErrorLen
	MaxOwnerConcurrency  = kernel.MaxOwnerConcurrency
	MaxQuota             = kernel.MaxQuota
	MemoryLostShare      = kernel.MemoryLostShare
	NoHighPriorityOwners = kernel.NoHighPriorityOwners
)

var (
	// Repairs lists every kind of repair (kernel.Repairs).
	Repairs = kernel.Repairs
	// ErrOverLimit means a task is over a concurrency limit.
	ErrOverLimit = kernel.ErrOverLimit
	// ErrNoSizedQueue means the size a task needs has no ready queue.
	ErrNoSizedQueue = kernel.ErrNoSizedQueue
	// JobIDPattern matches a job id.
	JobIDPattern = kernel.JobIDPattern
)

// NewExecutorID returns a fresh executor id (kernel.NewExecutorID).
func NewExecutorID() string { return kernel.NewExecutorID() }

// WithExecutor names the executor a call comes from.
func WithExecutor(ctx context.Context, id string) context.Context {
	return kernel.WithExecutor(ctx, id)
}

// ExecutorOf is the executor WithExecutor named, or "".
func ExecutorOf(ctx context.Context) string { return kernel.ExecutorOf(ctx) }

// FormatSizedQueues renders sized queues as ParseSizedQueues reads them.
func FormatSizedQueues(m map[spec.Size]string) string { return kernel.FormatSizedQueues(m) }

// ParseSizedQueues reads sized queues ("2GiB=url,...").
func ParseSizedQueues(s string) (map[spec.Size]string, error) { return kernel.ParseSizedQueues(s) }

// ParseOwnerLimits reads per-owner concurrency limits.
func ParseOwnerLimits(s string) (OwnerLimits, error) { return kernel.ParseOwnerLimits(s) }

// ParseOwnerQuota reads per-owner quotas.
func ParseOwnerQuota(s string) (OwnerLimits, error) { return kernel.ParseOwnerQuota(s) }
