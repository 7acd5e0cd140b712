package executor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A lease renewal in flight when its attempt ends is not cancelled by the
// end: a ChangeVisibility cut off client-side can still reach SQS after
// the attempt's outcome (the retry delay that a failure sets), and would
// stretch that delay to a whole lease. The renewal keeps its own bound
// (the beat's period), so the extender here sees its context end by that
// deadline, never by the attempt's cancel.
func TestRenewalInFlightOutlivesTheAttemptsEnd(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail bool
	}{
		{"the task succeeds", false},
		{"the task fails", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := &fakeCP{spec: mustSpec(t, oneTask), lease: time.Minute}
			beat := make(chan struct{})
			var once sync.Once
			var mu sync.Mutex
			var ended error
			extend := func(ctx context.Context, d time.Duration) error {
				first := false
				once.Do(func() { first = true })
				if !first {
					return nil
				}
				close(beat) // a renewal is in flight: the task may end now
				<-ctx.Done()
				mu.Lock()
				ended = ctx.Err()
				mu.Unlock()
				return ctx.Err()
			}
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, _ *Task) error {
				<-beat
				if tc.fail {
					return errBoom
				}
				return nil
			})
			r := &Runner{CP: cp, Blob: newBlob(), Registry: reg, Log: discard(), HeartbeatEvery: 20 * time.Millisecond}
			// Received with the lease as visibility: every extension is a renewal.
			r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now(), Visibility: time.Minute + sm.LeaseSkew}, extend)
			mu.Lock()
			defer mu.Unlock()
			if !errors.Is(ended, context.DeadlineExceeded) {
				t.Errorf("the renewal in flight ended with %v, want its own deadline (not the attempt's cancel)", ended)
			}
		})
	}
}
