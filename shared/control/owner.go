package control

import (
	"context"
	"fmt"
)

// JobOwner returns the owner of a job, from its record: the principal that
// submitted it, which a task message cannot name or change (its body is
// only the task's reference). Executors use it to keep owners' tasks apart
// (executor.LambdaHandler). Cached with the spec, since it never changes;
// batch.ErrNotFound when there is no such job.
func (s *Service) JobOwner(ctx context.Context, job string) (string, error) {
	m, err := s.jobMeta(ctx, job)
	if err != nil {
		return "", fmt.Errorf("owner of job %s: %w", job, err)
	}
	return m.owner, nil
}
