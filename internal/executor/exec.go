package executor

// Which function runs a task's stage (a registered Go function, an exec
// stage's program, a lambda stage's function), and whether this host can
// run it at all before it claims the task.

import (
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// taskFunc is what runs claim c's stage: its exec program, its Lambda
// function, or the function registered under its task name.
func (r *Runner) taskFunc(c control.Claim) (Func, error) {
	st := c.Spec.Stages[c.Task.Ref.Stage]
	switch {
	case st.Exec != nil:
		return r.execFunc(st, execstage.LimitsOf(c, r.ExecMemoryDivisor))
	case st.Lambda != "":
		return r.lambdaFunc(c)
	}
	fn, ok := r.Registry.Lookup(st.Task)
	if !ok {
		return nil, fmt.Errorf("task function %q is not registered on this executor", st.Task)
	}
	return fn, nil
}

// execFunc returns the Func that runs stage st's program (execstage)
// under lim.
func (r *Runner) execFunc(st spec.Stage, lim execstage.Limits) (Func, error) {
	prog, err := execstage.New(r.ExecDir, st, lim)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context, t *Task) error { return prog.Run(ctx, t.execAttempt()) }, nil
}

// execAttempt is what an exec stage's program gets of t.
func (t *Task) execAttempt() *execstage.Attempt {
	a := &execstage.Attempt{
		Job: t.Ref.Job, Stage: t.Stage, Partition: t.Ref.Partition, Attempt: t.Attempt,
		Format: t.Format, Header: t.Header, Params: t.Params, RunParams: t.RunParams, Source: t.Source,
		Input: t.Input, Out: t.Out, Log: t.Log,
	}
	// Left nil, not a nil pointer in an interface: nil says the program
	// cannot reject records, or checkpoint.
	if t.Rejects != nil {
		a.Rejects = t.Rejects
	}
	if k := t.ck; k != nil {
		a.Checkpoints = k
		k.mu.Lock()
		if k.from != nil {
			a.Resume = &execstage.Resume{Offset: k.from.Offset, State: k.from.State}
		}
		k.mu.Unlock()
	}
	return a
}

// Specs is what a control plane offers hosts that cannot run every stage:
// a job's spec, cached per process (control.Service.JobSpec, the cache
// Claim reads too), so looking before the claim costs no request.
type Specs interface {
	JobSpec(ctx context.Context, job string) (*spec.Job, error)
}

var _ Specs = (*control.Service)(nil)

// handBackDelay is how long a task message this host cannot run stays
// hidden once handed back: long enough not to receive it again at once,
// short enough that an executor that can run it (the Fargate service of
// ExecutorBoth, which the visible and hidden backlog keeps scaled out)
// gets it soon.
const handBackDelay = 5 * time.Second

// cannotRun says why this host cannot run the task ref names, before it
// is claimed: an exec stage on a host without the program (the Lambda
// executor, a host without a programs directory, or one whose directory
// lacks it). Such a task is handed back unclaimed, spending no attempt,
// for an executor that can run it; one no executor can run waits, its
// message bouncing, until its job is cancelled or its deadline passes
// (submit refuses programs no executor published, so this is a program
// removed since). nil when it can, and when the spec cannot be read
// here: the claim then decides, and the task function reports (taskFunc).
func (r *Runner) cannotRun(ctx context.Context, ref domain.TaskRef) error {
	sp, err := r.CP.JobSpec(ctx, ref.Job) // ErrUnsupported too: the claim decides
	if err != nil || ref.Stage < 0 || ref.Stage >= len(sp.Stages) {
		return nil
	}
	if err := r.wrongSize(ctx, ref, sp); err != nil { // memory.go
		return err
	}
	if st := sp.Stages[ref.Stage]; st.Exec != nil {
		_, err := execstage.Find(r.ExecDir, st)
		return err
	}
	return nil
}
