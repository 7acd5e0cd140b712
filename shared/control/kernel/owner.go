package kernel

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/control/jobid"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// JobOwner returns the owner of a job, from its record: the principal that
// submitted it, which a task message cannot name or change (its body is
// only the task's reference). Executors use it to keep owners' tasks apart
// (feed.LambdaHandler). Cached with the spec, since it never changes;
// domain.ErrNotFound when there is no such job.
func (s *Kernel) JobOwner(ctx context.Context, job string) (string, error) {
	m, err := s.Meta(ctx, job)
	if err != nil {
		return "", fmt.Errorf("owner of job %s: %w", job, err)
	}
	return m.Owner, nil
}

// JobSpec returns a job's spec, from the cache Claim reads it from (one
// read per job per process, then none): a host that cannot run every kind
// of stage looks at the task's stage before claiming, and hands back a
// task it cannot run without spending an attempt on it
// (executor.Runner.cannotRun). The spec is shared: callers must not
// change it. domain.ErrNotFound when there is no such job.
func (s *Kernel) JobSpec(ctx context.Context, job string) (*spec.Job, error) {
	m, err := s.Meta(ctx, job)
	if err != nil {
		return nil, fmt.Errorf("spec of job %s: %w", job, err)
	}
	return m.Spec, nil
}

// JobIDPattern is the form of a job id (see NewJobID). Routes check ids
// against it before any read.
var JobIDPattern = jobid.Pattern

// OwnedJob reads a job for its owner. Another owner's job is reported as
// not found, exactly like a job that does not exist, so that its existence
// does not leak.
func (s *Kernel) OwnedJob(ctx context.Context, owner, id string) (domain.Job, error) {
	if !JobIDPattern.MatchString(id) {
		return domain.Job{}, &spec.FieldError{Field: "id", Message: "is not a job id"}
	}
	j, err := s.store.JobGet(ctx, id)
	if err != nil {
		return domain.Job{}, err
	}
	if j.Owner != owner || !j.Deleting.IsZero() {
		// A job being deleted is gone to every route but its deletion's
		// repeat (operations/jobdelete.go).
		return domain.Job{}, fmt.Errorf("job %s: %w", id, domain.ErrNotFound)
	}
	return j, nil
}
