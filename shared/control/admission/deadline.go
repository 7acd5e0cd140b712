package admission

import "github.com/batchwork/batchwork/shared/spec"

// capDeadline gives a job without a deadline the longest one when the
// installation keeps ended jobs for a limited time (Config.Retention): the
// bucket's lifecycle rule expires objects under jobs/ by their age, so a
// job must end before its first objects expire. The construct refuses a
// retention shorter than the longest deadline and a day
// (lambdaenv.MinRetentionDays). The deadline is set before the spec is
// hashed and stored, so the job's status shows it.
func (s *Admitter) capDeadline(sp *spec.Job) {
	if s.cfg.Retention > 0 && sp.Deadline == 0 {
		sp.Deadline = spec.MaxDeadline
	}
}
