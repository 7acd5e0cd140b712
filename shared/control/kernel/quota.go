package kernel

import (
	"errors"
	"fmt"
)

// ErrQuota means an owner is at one of its quotas; nothing was written.
var ErrQuota = errors.New("owner quota reached")

// QuotaError says which quota refused a submission or a schedule.
type QuotaError struct {
	Quota string // "active jobs", "tasks" or "schedules"
	Max   int
	// Alone: the job alone is over the quota, so no wait for other jobs
	// to end admits it (a schedule's firing records it as skipped).
	Alone bool
}

func (e *QuotaError) Error() string {
	return fmt.Sprintf("your %s quota of %d is reached; wait for jobs to end or ask the operator", e.Quota, e.Max)
}

func (e *QuotaError) Unwrap() error { return ErrQuota }
