package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Per-size ready queues (control/sizedqueues.go): an env told to run
// executor sizes has a ready queue for each size beyond the default, and
// every message of a task goes to the queue of the size its next attempt
// needs, so executors of other sizes never see it.

// sizedEnv is an env running the sizes 1GiB (the default), 2GiB and 4GiB,
// with no executors of its own: each test plays them.
func sizedEnv(t *testing.T, execDir string) *env {
	t.Helper()
	cfg := testTimings
	cfg.ExecutorSizes = []spec.Size{1 << 30, 2 << 30, 4 << 30}
	reg := batchwork.NewRegistry()
	reg.Register("work", func(context.Context, *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, control: &cfg, execDir: execDir})
	for _, z := range []spec.Size{2 << 30, 4 << 30} {
		if e.r.Resources.Queues.Sized[z] == "" {
			t.Fatalf("no ready queue of %d MiB: %+v", z>>20, e.r.Resources.Queues)
		}
	}
	if _, ok := e.r.Resources.Queues.Sized[1<<30]; ok {
		t.Fatalf("the default size has a queue of its own: %+v", e.r.Resources.Queues)
	}
	return e
}

// queueCounts counts the messages (visible, in flight and delayed) of the
// priority queues together and of each sized queue.
func queueCounts(t *testing.T, e *env) (priority int, sized map[spec.Size]int) {
	t.Helper()
	q := e.r.Resources.Queues
	priority = messagesIn(t, e, q.High) + messagesIn(t, e, q.Normal) + messagesIn(t, e, q.Low)
	sized = map[spec.Size]int{}
	for z, url := range q.Sized {
		sized[z] = messagesIn(t, e, url)
	}
	return priority, sized
}

// handleFrom receives one message from url and handles it with r, as a
// host does (deleting, or making it visible again at once for a hide: the
// test waits on state, not on delays).
func handleFrom(t *testing.T, e *env, r *executor.Runner, url string) feed.Result {
	t.Helper()
	ctx := context.Background()
	var msgs []string
	var receipts []string
	waitFor(t, 30*time.Second, "a message on "+url, func() bool {
		for _, m := range receiveVisible(t, e, url) {
			msgs, receipts = append(msgs, m.Body), append(receipts, m.Receipt)
		}
		return len(msgs) > 0
	})
	for _, rc := range receipts[1:] { // one at a time: the rest back at once
		if err := e.r.Queue.ChangeVisibility(ctx, url, rc, 0); err != nil {
			t.Fatal(err)
		}
	}
	extend := func(ctx context.Context, d time.Duration) error {
		return e.r.Queue.ChangeVisibility(ctx, url, receipts[0], d)
	}
	res := r.Handle(ctx, feed.Delivery{Body: msgs[0]}, extend)
	switch res.Action {
	case feed.Hide:
		if err := extend(ctx, 0); err != nil {
			t.Fatal(err)
		}
	case feed.Delete:
		if err := e.r.Queue.DeleteBatch(ctx, url, []string{receipts[0]}); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// A stage asking for 4GiB has every message on the 4GiB queue, none on
// the priority queues (the default size's) nor on another size's, and a
// 4GiB executor polling only its queue runs the job to the end.
func TestSizedStageMessagesGoToItsSizesQueue(t *testing.T) {
	t.Parallel()
	e := sizedEnv(t, "")
	id := e.submit("big", []byte(`{"name":"big","stages":[{"name":"s","task":"work","resources":{"memory":"4GiB"},"partitions":{"count":3}}]}`))
	waitFor(t, 30*time.Second, "the stage's 3 messages", func() bool {
		_, sized := queueCounts(t, e)
		return sized[4<<30] == 3
	})
	if priority, sized := queueCounts(t, e); priority != 0 || sized[2<<30] != 0 {
		t.Fatalf("messages on the priority queues %d, on the 2GiB queue %d; want all 3 on the 4GiB queue only", priority, sized[2<<30])
	}
	big := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(e.reg), Log: newLogCounter().logger(), Memory: 4 << 30}
	for i := 0; i < 3; i++ {
		if res := handleFrom(t, e, big, e.r.Resources.Queues.Sized[4<<30]); res.Action != feed.Delete || res.Err != nil {
			t.Fatalf("task %d on the 4GiB executor: %+v, want committed", i, res)
		}
	}
	if st := e.waitJob(id, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %q, want SUCCEEDED", st.State, st.Error)
	}
}

// An attempt that runs out of memory on the 1GiB executor has its retry's
// message on the 2GiB queue, not the 1GiB one it came from; and when that
// message is lost, the sweep's resend goes to the 2GiB queue as well.
func TestRaisedTaskMessagesGoToTheRaisedSizesQueue(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prog := "#!/bin/sh\nif [ \"$BATCHWORK_ATTEMPT\" = 1 ]; then kill -9 $$; fi\necho \"ran attempt $BATCHWORK_ATTEMPT\"\n"
	if err := os.WriteFile(filepath.Join(dir, "prog"), []byte(prog), 0o755); err != nil {
		t.Fatal(err)
	}
	e := sizedEnv(t, dir)
	ctx := context.Background()
	if err := e.r.Service.PublishPrograms(ctx, []string{"prog"}); err != nil {
		t.Fatal(err)
	}
	runner := func(size spec.Size) *executor.Runner {
		return &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.NewRegistry(), Log: newLogCounter().logger(),
			ExecDir: dir, Memory: size}
	}
	q := e.r.Resources.Queues
	id := e.submit("oom", []byte(`{"name":"oom","retry":{"maxAttempts":3,"backoff":"1ms"},"stages":[{"name":"s","exec":["prog"],`+
		`"resources":{"memory":"1GiB","maxMemory":"4GiB"},"partitions":{"count":1}}]}`))
	ref := domain.TaskRef{Job: id}

	if res := handleFrom(t, e, runner(1<<30), q.Normal); res.Action != feed.Delete {
		t.Fatalf("attempt 1 on 1GiB: %+v, want its message moved to the 2GiB queue", res)
	}
	if task, err := e.r.Store.TaskGet(ctx, ref); err != nil || task.State != sm.TaskReady || task.Memory != 2<<30 {
		t.Fatalf("task after the OOM: %+v, %v; want READY at 2GiB", task, err)
	}
	if priority, sized := queueCounts(t, e); priority != 0 || sized[2<<30] != 1 || sized[4<<30] != 0 {
		t.Fatalf("after the OOM: %d messages on the priority queues, %v on the sized ones; want 1 on the 2GiB queue only", priority, sized)
	}

	// The retry's message is lost.
	var msgs []queue.Message
	waitFor(t, 30*time.Second, "the retry's message (after its backoff)", func() bool {
		msgs = append(msgs, receiveVisible(t, e, q.Sized[2<<30])...)
		return len(msgs) > 0
	})
	if len(msgs) != 1 {
		t.Fatalf("2GiB queue: %d messages, want 1", len(msgs))
	}
	if err := e.r.Queue.DeleteBatch(ctx, q.Sized[2<<30], []string{msgs[0].Receipt}); err != nil {
		t.Fatal(err)
	}
	// The sweep finds the READY task waiting and resends its message, to
	// the raised size's queue.
	waitFor(t, 30*time.Second, "the sweep's resend", func() bool {
		if _, err := e.r.Service.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		_, sized := queueCounts(t, e)
		return sized[2<<30] > 0
	})
	if priority, sized := queueCounts(t, e); priority != 0 || sized[4<<30] != 0 {
		t.Fatalf("after the resend: %d messages on the priority queues, %v on the sized ones; want them on the 2GiB queue only", priority, sized)
	}
	if res := handleFrom(t, e, runner(2<<30), q.Sized[2<<30]); res.Action != feed.Delete || res.Err != nil {
		t.Fatalf("attempt 2 on 2GiB: %+v, want committed", res)
	}
	if st := e.waitJob(id, 30*time.Second); st.State != string(sm.JobSucceeded) {
		t.Fatalf("job %s %q, want SUCCEEDED", st.State, st.Error)
	}
}
