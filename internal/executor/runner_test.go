package executor

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TestHandleSetsVisibilityToLease checks that the message's visibility is
// set to the stage's lease right after the claim, before the task runs, so
// a crashed executor's message returns when its lease ends rather than
// when the host's receive visibility does. The emulator test
// TestCrashedExecutorMessageReturnsAfterLease shows the effect on SQS.
func TestHandleSetsVisibilityToLease(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		lease     time.Duration
		received  time.Duration // the visibility the host received with
		extendErr error
		want      []time.Duration
	}{
		// The message stays hidden for the lease and the skew margin: until
		// another claim can reclaim the task.
		{"lease shorter than the queue's visibility", 5 * time.Second, 0, nil, []time.Duration{5*time.Second + sm.LeaseSkew}},
		{"lease longer than the queue's visibility", 2 * time.Hour, 0, nil, []time.Duration{2*time.Hour + sm.LeaseSkew}},
		{"extension fails: the task still runs", 30 * time.Second, 0, errBoom, []time.Duration{30*time.Second + sm.LeaseSkew}},
		{"received with the lease already: no request", time.Minute, time.Minute + sm.LeaseSkew, nil, nil},
		{"received with another visibility", time.Minute, 20 * time.Second, nil, []time.Duration{time.Minute + sm.LeaseSkew}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cp := &fakeCP{spec: mustSpec(t, oneTask), lease: tc.lease}
			var mu sync.Mutex
			var extends []time.Duration
			claimsAtExtend := -1
			extend := func(ctx context.Context, d time.Duration) error {
				mu.Lock()
				defer mu.Unlock()
				if claimsAtExtend < 0 {
					claims, _, _ := cp.snapshot()
					claimsAtExtend = len(claims)
				}
				extends = append(extends, d)
				return tc.extendErr
			}
			var seenByTask []time.Duration
			reg := NewRegistry()
			reg.Register("work", func(ctx context.Context, _ *Task) error {
				mu.Lock()
				defer mu.Unlock()
				seenByTask = slices.Clone(extends)
				return nil
			})
			r := &Runner{CP: cp, Blob: &memBlob{}, Registry: reg, Log: discard(), HeartbeatEvery: time.Hour}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0", SentAt: time.Now(), Visibility: tc.received}, extend)
			if res.Action != feed.Delete || res.Err != nil {
				t.Fatalf("result %+v, want feed.Delete without error", res)
			}
			if !slices.Equal(seenByTask, tc.want) {
				t.Errorf("visibility changes before the task ran: %v, want %v", seenByTask, tc.want)
			}
			if tc.want != nil && claimsAtExtend != 1 {
				t.Errorf("first visibility change came after %d claims, want right after the claim", claimsAtExtend)
			}
			if _, commits, _ := cp.snapshot(); len(commits) != 1 {
				t.Errorf("commits %v, want 1", commits)
			}
		})
	}
}
