package control

import (
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
)

// NewMeter returns a process's per-job request meter (Config.Meter),
// which reads a queue message's job from its task reference: a task's
// message, or its speculative copy's.
func NewMeter() *meter.Meter { return meter.New(MessageJob) }

// MessageJob is the job of a ready queue's message, "" for any other
// message (a timer's, a relay's).
func MessageJob(body string) string {
	body, _ = IsCopyMessage(body)
	ref, err := domain.ParseTaskRef(body)
	if err != nil {
		return ""
	}
	return ref.Job
}
