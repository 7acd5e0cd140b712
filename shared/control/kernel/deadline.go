package kernel

import (
	"time"

	"github.com/batchwork/batchwork/shared/domain"
)

// JobDeadline is when j's deadline passes, or zero without one: submit
// indexes the job at it, a redrive past it is refused. It counts from the
// job's start time when it was submitted with one.
func JobDeadline(j domain.Job) time.Time {
	if j.Spec == nil || j.Spec.Deadline <= 0 {
		return time.Time{}
	}
	from := j.Created
	if !j.StartAt.IsZero() {
		from = j.StartAt
	}
	return from.Add(time.Duration(j.Spec.Deadline))
}
