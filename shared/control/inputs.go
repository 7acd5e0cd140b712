package control

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/spec"
)

// jobsArea is where the installation keeps every job's plans, outputs and
// manifests in its data bucket (see shared/blob/keys.go).
const jobsArea = "jobs/"

// checkInputs refuses input prefixes that would read other owners' data
// through the installation's own roles: in the data bucket, a prefix that
// reaches into the jobs area must lie within one of the owner's own jobs
// (jobs/<id>/...). The planner lists a prefix with a function's role and
// the executor reads it with its own, and both may read the whole bucket,
// so without this check a spec naming s3://<data bucket>/jobs/ would hand
// one owner every other owner's outputs.
func (s *Service) checkInputs(ctx context.Context, owner string, sp *spec.Job) error {
	for i, st := range sp.Stages {
		if st.Partitions == nil || st.Partitions.Input == nil {
			continue
		}
		field := fmt.Sprintf("stages[%d].partitions.input.prefix", i)
		bucket, prefix, err := spec.ParseS3URI(st.Partitions.Input.Prefix)
		if err != nil || bucket != s.blob.Bucket() {
			continue // validation reports a bad URI; other buckets are the operator's IAM's business
		}
		if strings.HasPrefix(jobsArea, prefix) {
			return &spec.FieldError{Field: field, Message: "lists the installation's job area; name your own job's outputs (jobs/<your job id>/...) or your inputs"}
		}
		rest, ok := strings.CutPrefix(prefix, jobsArea)
		if !ok {
			continue
		}
		id, _, whole := strings.Cut(rest, "/")
		if !whole {
			return &spec.FieldError{Field: field, Message: "names part of a job id; name a whole job of yours: jobs/<job id>/..."}
		}
		j, err := s.store.GetJob(ctx, id)
		if errors.Is(err, batch.ErrNotFound) || (err == nil && j.Owner != owner) {
			// Not found and not yours read the same: no other owner's job
			// can be told to exist.
			return &spec.FieldError{Field: field, Message: fmt.Sprintf("job %s is not one of yours", id)}
		}
		if err != nil {
			return fmt.Errorf("check input of stage %s: %w", st.Name, err)
		}
	}
	return nil
}
