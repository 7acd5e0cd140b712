package kernel

import (
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// Claim is a granted claim: the task record and the job's spec.
type Claim struct {
	Task  domain.Task
	Spec  *spec.Job
	Lease time.Duration
	// Speculative: the claim is a speculative copy's (speculation.go); its
	// Task has the copy's token, attempt and lease.
	Speculative bool
	// Trace is the traceparent of the task's span (shared/tracing), which
	// the attempt's spans are children of: the task record's span id in
	// its job's trace. Empty when tracing was off, or unknown here.
	Trace string
	// Combine lists, for a task that reduces the pieces of its skewed
	// partition (shared/skew, Plan.Combine), the committed outputs of those
	// pieces, which it reads in place of its shuffle partition.
	Combine []domain.Output
}

// StageName is the claimed task's stage name.
func (c Claim) StageName() string { return c.Spec.Stages[c.Task.Ref.Stage].Name }
