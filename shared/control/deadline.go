package control

import (
	"time"

	"github.com/batchwork/batchwork/shared/batch"
)

// DeadlineReason is the error of a job failed by its deadline.
const DeadlineReason = "deadline exceeded"

// jobDeadline is when j's deadline passes, or zero without one.
func jobDeadline(j batch.Job) time.Time {
	if j.Spec == nil || j.Spec.Deadline <= 0 {
		return time.Time{}
	}
	return j.Created.Add(time.Duration(j.Spec.Deadline))
}
