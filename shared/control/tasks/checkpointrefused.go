package tasks

import (
	"context"
	"errors"
	"path"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
)

// CheckpointRefused tags for the bucket's expiry rule what checkpoint seq
// of c's attempt wrote (its record and segments) once the pointer to it
// was refused because the attempt lost its claim: nothing will ever read
// those objects, and without the tag they would stay until the job's data
// is deleted, or for ever when it already was (the job deleted while the
// attempt ran on: then every checkpoint object of the task is tagged, as
// no attempt will resume). Best effort, like marking an ended attempt's
// outputs.
//
// What the pointer names is never tagged: a refusal may follow a write
// that applied (its response lost, the claim taken over before the
// retry), and then a later attempt resumes from it.
func (s *Lifecycle) CheckpointRefused(ctx context.Context, c kernel.Claim, seq int) {
	ref := c.Task.Ref
	stage := c.StageName()
	t, err := s.store.TaskGet(ctx, ref)
	var prefixes []string
	switch {
	case errors.Is(err, domain.ErrNotFound):
		prefixes = []string{blob.TaskCheckpointsPrefix(ref.Job, stage, ref.Partition)}
	case err != nil:
		s.Logger(ref).Warn("tag a refused checkpoint's objects", "attempt", c.Task.Attempt, "seq", seq, "err", err)
		return
	case t.Checkpoint.Attempt == c.Task.Attempt && t.Checkpoint.Seq == seq:
		return // its write applied: a later attempt resumes from it
	default:
		prefixes = []string{
			blob.CheckpointKey(ref.Job, stage, ref.Partition, c.Task.Attempt, seq),
			path.Dir(blob.SegmentKey(ref.Job, stage, ref.Partition, c.Task.Attempt, seq, 0)) + "/",
		}
	}
	for _, p := range prefixes {
		if _, err := s.blob.MarkUncommitted(ctx, p); err != nil {
			s.Logger(ref).Warn("tag a refused checkpoint's objects", "attempt", c.Task.Attempt, "seq", seq, "err", err)
		}
	}
}
