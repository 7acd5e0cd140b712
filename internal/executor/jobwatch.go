package executor

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// The job watch: control.Service says cheaply whether a claim's job still
// runs, from its per-process job-state cache (one read per job per TTL for
// all of a process's tasks). The runner checks every JobStateTTL, so a
// task of a job that was cancelled, failed or passed its deadline stops
// within two TTLs and a read, instead of at its next heartbeat (lease/3).
// A control plane whose JobStateTTL is 0 stops tasks at their heartbeats.

// jobWatch ticks every JobStateTTL while the task runs; nil (never) when
// the control plane cannot check jobs (a TTL of 0).
func (r *Runner) jobWatch(c control.Claim) (<-chan time.Time, func()) {
	ttl := r.CP.JobStateTTL()
	if ttl <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(ttl)
	return t.C, t.Stop
}

// jobEnded checks the claim's job and cancels the task when it ended.
func (r *Runner) jobEnded(ctx context.Context, c control.Claim, cancel context.CancelCauseFunc, log *slog.Logger) bool {
	err := r.CP.CheckJob(ctx, c)
	switch {
	case errors.Is(err, domain.ErrJobNotRunning):
		cancel(errJobStopped)
		return true
	case err != nil && ctx.Err() == nil:
		log.Warn("check the job", "err", err)
	}
	return false
}
