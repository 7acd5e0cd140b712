package integration

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A crashed executor's message returns when the stage's lease ends, not
// when the queue's visibility timeout (much longer: it is sized for the
// Lambda executor) does, because the runner sets the message's visibility
// to the lease right after its claim. The next executor then reclaims the
// task, and the crashed one's late commit is fenced.
func TestCrashedExecutorMessageReturnsAfterLease(t *testing.T) {
	t.Parallel()
	const lease = 2 * time.Second
	started, release := make(chan struct{}), make(chan struct{})
	reg := batchwork.NewRegistry()
	reg.Register("hang", func(ctx context.Context, t *batchwork.Task) error {
		if t.Attempt == 1 {
			close(started)
			<-release // the process is gone: no heartbeat, no commit
		}
		_, err := t.Out.Write([]byte("out\n"))
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	url := e.r.Resources.Queues.Normal
	queueVis, err := strconv.Atoi(queueAttr(t, e, url, sqstypes.QueueAttributeNameVisibilityTimeout))
	if err != nil {
		t.Fatal(err)
	}
	const within = 15 * time.Second
	if time.Duration(queueVis)*time.Second <= within {
		t.Fatalf("the queue's visibility timeout is %d s; the test needs one longer than %s to tell it from the lease", queueVis, within)
	}
	id := e.submit("vis", []byte(`{"name":"vis","lease":"2s","stages":[{"name":"s","task":"hang","partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id, Stage: 0, Partition: 0}

	// Received as Lambda's event source receives: with the queue's own
	// visibility timeout (0 asks for the queue default).
	var msgs []queue.Message
	for deadline := time.Now().Add(10 * time.Second); len(msgs) == 0 && time.Now().Before(deadline); {
		if msgs, err = e.r.Queue.Receive(ctx, url, 1, time.Second, 0); err != nil {
			t.Fatal(err)
		}
	}
	if len(msgs) != 1 {
		t.Fatal("the task's message never arrived")
	}
	received := time.Now()
	m := msgs[0]
	r := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), HeartbeatEvery: time.Hour}
	result := make(chan feed.Result, 1)
	go func() {
		result <- r.Handle(ctx, feed.Delivery{Body: m.Body, SentAt: m.SentAt}, func(ctx context.Context, d time.Duration) error {
			return e.r.Queue.ChangeVisibility(ctx, url, m.Receipt, d)
		})
	}()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the first attempt never started")
	}

	var again []queue.Message
	for deadline := received.Add(within); len(again) == 0 && time.Now().Before(deadline); {
		if again, err = e.r.Queue.Receive(ctx, url, 1, time.Second, time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	back := time.Since(received)
	if len(again) == 0 {
		t.Fatalf("the crashed executor's message did not return within %s (lease %s, queue visibility %d s)", within, lease, queueVis)
	}
	if back < lease {
		t.Errorf("the message returned after %s, before the %s lease ended", back, lease)
	}

	// The next executor reclaims the task from the returned message.
	res := r.Handle(ctx, feed.Delivery{Body: again[0].Body, SentAt: again[0].SentAt}, func(ctx context.Context, d time.Duration) error {
		return e.r.Queue.ChangeVisibility(ctx, url, again[0].Receipt, d)
	})
	if res.Action != feed.Delete || res.Err != nil {
		t.Fatalf("second executor: %+v, want committed", res)
	}
	close(release)
	select {
	case res := <-result:
		// Fenced: refused as stale, or as already finished by attempt 2,
		// or stopped before its commit because its job watch saw the job
		// end (attempt 2's commit ended it); which one depends on timing.
		// Either way it must not commit, which the task's record shows.
		stopped := res.Err != nil && res.Err.Error() == "job no longer running"
		if !errors.Is(res.Err, domain.ErrStaleClaim) && !errors.Is(res.Err, domain.ErrAlreadyDone) && !stopped {
			t.Errorf("crashed executor's late commit: %+v, want it refused", res)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the first attempt never finished")
	}
	task, err := e.r.Store.TaskGet(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if task.State != sm.TaskSucceeded || task.CommittedAttempt != 2 {
		t.Fatalf("task %s committed attempt %d, want SUCCEEDED at attempt 2", task.State, task.CommittedAttempt)
	}
}
