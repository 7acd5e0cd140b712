package control

import (
	"context"
)

// Submit records a job exactly once and starts it (admission.Admitter.Submit).
// A job submitted to start within schedules.TimerWindow has its start
// handed to the timer queue here, as the sweep would on its next run, so
// that it starts on time: admission records the job, the schedules own
// the timer queue.
func (s *Service) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	res, err := s.Admitter.Submit(ctx, req)
	if err != nil || res.StartAt == nil {
		return res, err
	}
	if herr := s.Firer.HandOffStart(ctx, req.Owner, res.JobID, *res.StartAt); herr != nil {
		// The sweep hands the start off, or fires it, itself.
		s.log.Warn("hand off a job's start", "job_id", res.JobID, "err", herr)
	}
	return res, nil
}
