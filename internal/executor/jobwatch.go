package executor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control"
)

// JobChecker is what a control plane offers that can say cheaply whether a
// claim's job still runs (control.Service does, from its per-process
// job-state cache: one read per job per TTL for all of a process's tasks).
// With it the runner checks every JobStateTTL, so a task of a job that
// was cancelled, failed or passed its deadline stops within two TTLs and a
// read, instead of at its next heartbeat (lease/3). A control plane
// without it (a remote executor's) stops tasks at their heartbeats.
type JobChecker interface {
	CheckJob(ctx context.Context, c control.Claim) error
	JobStateTTL() time.Duration
}

var _ JobChecker = (*control.Service)(nil)

// jobWatch ticks every JobStateTTL while the task runs; nil (never) when
// the control plane cannot check jobs.
func (r *Runner) jobWatch(c control.Claim) (<-chan time.Time, func()) {
	jc, ok := r.CP.(JobChecker)
	if !ok || jc.JobStateTTL() <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(jc.JobStateTTL())
	return t.C, t.Stop
}

// jobEnded checks the claim's job and cancels the task when it ended.
func (r *Runner) jobEnded(ctx context.Context, c control.Claim, cancel context.CancelCauseFunc, log *slog.Logger) bool {
	err := r.CP.(JobChecker).CheckJob(ctx, c)
	switch {
	case errors.Is(err, batch.ErrJobNotRunning):
		cancel(errJobStopped)
		return true
	case err != nil && ctx.Err() == nil:
		log.Warn("check the job", "err", err)
	}
	return false
}
