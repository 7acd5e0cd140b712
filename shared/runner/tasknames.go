package runner

import (
	"context"

	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/iamrec"
)

// publishTaskNames publishes the names of the tasks the runner's own
// executor slots run (its registry), before the API serves, so a submit
// naming them is accepted from the first request and a misspelled name is
// refused (control.Config.CheckTaskNames). A control-only runner runs no
// executor: its separate executor processes publish their own names when
// they start. A failure is logged, not fatal: the runner can still run
// every task it has, and the names count once a later start publishes.
//
// Likewise the programs of its exec directory (Options.ExecDir), which
// exec stages are checked against (control.Service.PublishPrograms).
func (r *Runner) publishTaskNames(ctx context.Context) {
	if r.opts.ControlOnly {
		return
	}
	// On AWS each executor publishes with its own role.
	ctx = iamrec.WithFunction(ctx, iamrec.FnExecutor)
	if r.opts.Registry != nil {
		if names := r.opts.Registry.Names(); len(names) > 0 {
			if err := r.Service.PublishTaskNames(ctx, names); err != nil {
				r.opts.Log.Warn("publish task names", "err", err, "tasks", names)
			}
		}
	}
	programs, err := execstage.Programs(r.opts.ExecDir)
	if err != nil {
		r.opts.Log.Warn("publish programs", "err", err, "exec_dir", r.opts.ExecDir)
		return
	}
	if len(programs) > 0 {
		if err := r.Service.PublishPrograms(ctx, programs); err != nil {
			r.opts.Log.Warn("publish programs", "err", err, "programs", programs)
		}
	}
}
