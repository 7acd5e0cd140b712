package executor

// Per-size ready queues (control/sizedqueues.go): a task's message is sent
// to the queue of the size its next attempt needs, and each executor of a
// size polls only its size's queue. Two messages still end up on the
// wrong queue: one sent before an out-of-memory retry raised its task,
// and the message of an attempt this executor just failed for memory,
// whose retry runs on the next size up. Handing either back would only
// pass it between executors of the same wrong size, so the executor
// forwards it to the right queue and deletes it; if the forward fails, it
// hands the message back as before, and nothing is lost.

import (
	"context"
	"errors"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/spec"
)

// forward resends the message body names to its task's size's queue and
// says whether the message received can be deleted.
func (r *Runner) forward(ctx context.Context, body string, delay time.Duration) bool {
	err := r.CP.Forward(ctx, body, delay)
	switch {
	case errors.Is(err, ErrUnsupported):
		return false
	case err != nil:
		r.Log.Warn("forward a message to its size's queue; handing it back", "body", body, "err", err)
		return false
	}
	return true
}

// forwardWrongSize turns the hand-back of a task of another size (err from
// cannotRun) into a forward to that size's queue.
func (r *Runner) forwardWrongSize(ctx context.Context, body string, err error) (feed.Result, bool) {
	if !errors.Is(err, errWrongSize) || !r.forward(ctx, body, 0) {
		return feed.Result{}, false
	}
	return feed.Result{Action: feed.Delete, Err: err}, true
}

// forwardRaised moves the retry of an attempt that ran out of memory (a
// Decision whose Memory is the size it climbed to) to that size's queue.
func (r *Runner) forwardRaised(ctx context.Context, body string, raised spec.Size, delay time.Duration) bool {
	if raised == 0 || raised == r.Memory {
		return false
	}
	return r.forward(ctx, body, delay)
}
