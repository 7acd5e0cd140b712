package runner

import (
	"context"

	"github.com/batchwork/batchwork/internal/iamrec"
)

// publishTaskNames publishes the names of the tasks the runner's own
// executor slots run (its registry), before the API serves, so a submit
// naming them is accepted from the first request and a misspelled name is
// refused (control.Config.CheckTaskNames). A control-only runner runs no
// executor: its separate executor processes publish their own names when
// they start. A failure is logged, not fatal: the runner can still run
// every task it has, and the names count once a later start publishes.
func (r *Runner) publishTaskNames(ctx context.Context) {
	if r.opts.ControlOnly || r.opts.Registry == nil {
		return
	}
	names := r.opts.Registry.Names()
	if len(names) == 0 {
		return
	}
	// On AWS each executor publishes with its own role.
	ctx = iamrec.WithFunction(ctx, iamrec.FnExecutor)
	if err := r.Service.PublishTaskNames(ctx, names); err != nil {
		r.opts.Log.Warn("publish task names", "err", err, "tasks", names)
	}
}
