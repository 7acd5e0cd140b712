package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// saveRejects writes the attempt's rejected records, if any, as one
// object, before the attempt commits: a committed attempt's records are
// always there to show. The key is the attempt's own, so a put that finds
// the object there (a retried write of this same attempt) is done.
func (r *Runner) saveRejects(ctx context.Context, c control.Claim, t *Task) error {
	recs := t.Rejects.Records()
	n := t.Rejects.Count()
	if n == 0 {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, rec := range recs {
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("bad records: %w", err)
		}
	}
	if omitted := n - int64(len(recs)); omitted > 0 {
		if err := enc.Encode(domain.BadRecord{Stage: t.Stage, Partition: c.Task.Ref.Partition, Attempt: c.Task.Attempt, Offset: -1, Omitted: omitted}); err != nil {
			return fmt.Errorf("bad records: %w", err)
		}
	}
	key := blob.BadRecordsKey(c.Task.Ref.Job, t.Stage, c.Task.Ref.Partition, c.Task.Attempt)
	if err := r.Blob.PutIfAbsent(ctx, key, buf.Bytes()); err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("write bad records: %w", err)
	}
	return nil
}

// trackRejects gives the attempt its rejections, reading its input
// through them so Reject can find where a record starts.
func (r *Runner) trackRejects(c control.Claim, t *Task) {
	st := c.Spec.Stages[c.Task.Ref.Stage]
	rj, in := rejects.New(st.Name, c.Task.Ref.Partition, c.Task.Attempt, st.MaxBadRecords, t.Input)
	t.Rejects = rj
	if in != nil {
		t.Input = in
	}
}
