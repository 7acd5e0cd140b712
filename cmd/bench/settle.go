package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/runner"
)

// settleAhead is how far past the end of a job the settling sweep looks:
// past StuckAfter (5 minutes), when the ready markers of the job's chunks
// fall due (shared/dynamo/ready.go).
const settleAhead = 10 * time.Minute

// settle runs one sweep through the runner's own (counted) clients on a
// clock settleAhead in the future, so that work a job leaves for the
// sweep after it ended is counted in its requests and capacity: each
// chunk's ready marker is read back and taken out of the sweep index
// when it falls due, minutes after the bench's jobs are done.
func settle(ctx context.Context, r *runner.Runner) error {
	svc := control.New(control.Config{Queues: r.Resources.Queues}, r.Store, r.Queue, r.Blob,
		slog.New(slog.NewJSONHandler(io.Discard, nil)))
	svc.Now = func() time.Time { return time.Now().UTC().Add(settleAhead) }
	if _, err := svc.Sweep(ctx); err != nil {
		return fmt.Errorf("settling sweep: %w", err)
	}
	return nil
}
