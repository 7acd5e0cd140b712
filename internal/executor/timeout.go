package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// DefaultTimeoutGrace is how long a task function may run on after its
// stage's timeout cancelled its context before the runner abandons it.
// A function that watches ctx returns well within it; an exec program's
// process group is killed at the cancel. One that ignores ctx is left
// running in its goroutine (Go cannot stop it), its attempt failed and
// retried: the failure moves the task's claim on, so nothing the
// abandoned function does later can commit.
const DefaultTimeoutGrace = 5 * time.Second

// stageTimeout is claim c's stage's timeout; 0: none.
func stageTimeout(c control.Claim) time.Duration {
	return time.Duration(c.Spec.Stages[c.Task.Ref.Stage].Timeout)
}

// callTask runs fn on t. With a stage timeout, cancel (the task context's)
// fires with a *domain.TimeoutError once the attempt has run that long,
// counted from start; after any cancel the function has
// Runner.TimeoutGrace to return, and is then abandoned with an error
// wrapping the cancel's cause. Without a timeout it is safeCall.
//
// running is nil when the function returned; for an abandoned one it is
// closed when (if ever) the function returns. Until then the function
// still reads its input and uses its Task from its own goroutine, so the
// caller must neither read the input's state nor close it under it.
func (r *Runner) callTask(ctx context.Context, cancel context.CancelCauseFunc, c control.Claim, start time.Time, fn Func, t *Task) (running <-chan struct{}, err error) {
	timeout := stageTimeout(c)
	if timeout <= 0 {
		return nil, safeCall(ctx, fn, t)
	}
	timer := time.AfterFunc(time.Until(start.Add(timeout)), func() {
		cancel(&domain.TimeoutError{After: timeout})
	})
	defer timer.Stop()
	done := make(chan error, 1) // buffered: an abandoned function's send must not block
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		done <- safeCall(ctx, fn, t)
	}()
	select {
	case err := <-done:
		return nil, err
	case <-ctx.Done():
	}
	grace := cmp.Or(r.TimeoutGrace, DefaultTimeoutGrace)
	wait := time.NewTimer(grace)
	defer wait.Stop()
	select {
	case err := <-done:
		return nil, err
	case <-wait.C:
		cause := context.Cause(ctx)
		t.Log.Warn("task function still running after its context was cancelled; abandoning it", "grace", grace.String(), "cause", cause)
		return returned, fmt.Errorf("%w (the task function ignored the cancel and was abandoned after %v)", cause, grace)
	}
}

// timedOut is the attempt's timeout when its context was cancelled by it.
func timedOut(cause error) (*domain.TimeoutError, bool) {
	var te *domain.TimeoutError
	return te, errors.As(cause, &te)
}
