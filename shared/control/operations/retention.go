package operations

import (
	"context"
	"errors"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// reusedRecheck is how long the sweep waits before it looks again at an
// expired job whose outputs a living rerun reuses.
const reusedRecheck = time.Hour

// ExpireJob deletes an ended job whose retention is over, from the sweep:
// a job ended with a retention is in the sweep index at its end plus the
// retention (dynamo/retention.go). The steps are DeleteJob's but the
// data: its objects are the bucket's lifecycle rule's, which expires each
// one the retention after it was written, so all of them by now (or within
// the day S3 rounds to). A job whose retention is not over yet goes back
// in the index at its end; one that takes more than a call is looked at
// again at the next sweep.
func (s *Operator) ExpireJob(ctx context.Context, it dynamo.DueItem, j domain.Job, now time.Time) error {
	at := j.Ended.Add(s.cfg.Retention)
	if now.Before(at) {
		return s.store.DueSet(ctx, it, at)
	}
	log := s.log.With("job_id", j.ID, "owner", j.Owner)
	if j.Deleting.IsZero() {
		err := s.store.JobMarkDeleting(ctx, j.ID, j.Owner, now)
		var reused *domain.ReusedError
		if errors.As(err, &reused) {
			// A living rerun reuses this job's outputs in place (its
			// manifests name them): expiring the job now would take
			// records and objects its published outputs stand on. It is
			// skipped and looked at again later; it expires once every
			// rerun reusing it is gone (each expires by its own retention).
			// Its records' TTL, the backstop, moves with its turn.
			log.Info("job expiry postponed: its outputs are reused", "reused_by", reused.By)
			return s.store.JobPostponeExpiry(ctx, j.ID, j.Owner, now.Add(reusedRecheck))
		}
		if err != nil {
			return err
		}
	}
	n, complete, err := s.store.JobDeleteRecords(ctx, j.ID, recordsPerCall)
	if err != nil {
		return err
	}
	if !complete {
		log.Info("expiring job", "records", n)
		return s.store.DueSet(ctx, it, now)
	}
	if _, err := s.store.JobDeleteItem(ctx, j.ID); err != nil {
		return err
	}
	log.Info("job expired", "retention", s.cfg.Retention, "ended", j.Ended)
	return nil
}
