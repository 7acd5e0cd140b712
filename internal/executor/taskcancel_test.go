package executor

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// cancelledCP answers every heartbeat as control.Service does once the
// task's owner cancelled it.
type cancelledCP struct{ *fakeCP }

func (cancelledCP) Heartbeat(context.Context, control.Claim) error {
	return fmt.Errorf("heartbeat: %w: %w", domain.ErrTaskCancelled, domain.ErrStaleClaim)
}

// A heartbeat that says the task was cancelled stops the function as a
// job's end does: no commit, no failure recorded, the message deleted
// (a stale claim would leave it to come back).
func TestCancelledTaskStopsItsAttempt(t *testing.T) {
	t.Parallel()
	f := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
	reg := NewRegistry()
	saw := make(chan error, 1)
	reg.Register("work", func(ctx context.Context, _ *Task) error {
		<-ctx.Done()
		saw <- context.Cause(ctx)
		return ctx.Err()
	})
	r := &Runner{CP: cancelledCP{f}, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: time.Millisecond}
	done := make(chan feed.Result, 1)
	go func() { done <- r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil) }()
	if cause := within(t, saw, 10*time.Second, "the function to be stopped"); !errors.Is(cause, domain.ErrTaskCancelled) {
		t.Errorf("the function's context ended with %v, want the cancel", cause)
	}
	res := within(t, done, 10*time.Second, "the runner to finish")
	if res.Action != feed.Delete || !errors.Is(res.Err, domain.ErrTaskCancelled) {
		t.Errorf("result %+v, want feed.Delete with the cancel", res)
	}
	if _, commits, fails := f.snapshot(); len(commits)+len(fails) != 0 {
		t.Errorf("commits %v, fails %v; want neither", commits, fails)
	}
}
