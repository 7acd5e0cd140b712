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
}

// StageName is the claimed task's stage name.
func (c Claim) StageName() string { return c.Spec.Stages[c.Task.Ref.Stage].Name }
