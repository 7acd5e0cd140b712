package integration

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// countItems scans the test's table; only tests scan, never the product.
func countItems(ctx context.Context, e *env) (int, error) {
	out, err := dynamodb.NewFromConfig(e.cfg).Scan(ctx, &dynamodb.ScanInput{TableName: &e.r.Resources.Table})
	if err != nil {
		return 0, err
	}
	return int(out.Count), nil
}

// ---- control plane under test control (sweep, Lambda and executor tests) ----

// testClock is a settable clock for control.Service.Now, so tests move past
// leases, backoffs and sweep due times without waiting. It starts at the
// real time, so that the few waits that are real (SQS visibility and
// delays) stay consistent with the records.
type testClock struct{ ns atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ns.Store(time.Now().UTC().Truncate(time.Millisecond).UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *testClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// testTimings are the control plane timings of tests that drive the sweep
// by hand.
var testTimings = control.Config{StartGrace: time.Second, CheckEvery: time.Second, StuckAfter: 5 * time.Second}

// logCounter is a slog handler that counts records by message, so a test
// can assert that a step which must happen once (a stage completing, a job
// succeeding) was logged by exactly one winner.
type logCounter struct {
	mu    sync.Mutex
	n     map[string]int
	attrs []slog.Attr
	next  slog.Handler
}

func newLogCounter() *logCounter {
	c := &logCounter{n: map[string]int{}, next: slog.NewJSONHandler(io.Discard, nil)}
	if testing.Verbose() {
		c.next = slog.NewJSONHandler(os.Stderr, nil)
	}
	return c
}

func (c *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (c *logCounter) WithGroup(string) slog.Handler            { return c }
func (c *logCounter) WithAttrs(as []slog.Attr) slog.Handler    { return c }
func (c *logCounter) Handle(ctx context.Context, r slog.Record) error {
	c.mu.Lock()
	c.n[r.Message]++
	c.mu.Unlock()
	return c.next.Handle(ctx, r)
}

func (c *logCounter) logger() *slog.Logger { return slog.New(c) }

// count returns how often msg was logged.
func (c *logCounter) count(msg string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[msg]
}

// newService builds a control plane with timings cfg over the env's
// resources, with store and queue (the env's adapters, or fault-injecting
// wrappers of them), the test clock and no jitter. Several services over
// one env are several processes (an API, a sweep Lambda, executors)
// sharing the state.
func newService(e *env, cfg control.Config, store control.Store, q control.Queue, clk *testClock, log *slog.Logger) *control.Service {
	return newServiceOver(e, cfg, store, q, e.r.Blob, clk, log)
}

func newServiceOver(e *env, cfg control.Config, store control.Store, q control.Queue, b control.Blob, clk *testClock, log *slog.Logger) *control.Service {
	cfg.Queues = e.r.Resources.Queues
	svc := control.New(cfg, store, q, b, log)
	// Events go to the env's bus, as the runner's do (shared/events).
	svc.Events = e.r.Service.Events
	svc.Now = clk.Now
	svc.Jitter = func(time.Duration) time.Duration { return 0 }
	return svc
}

// newServiceWithBlob is newService over the env's queue with its own
// store and blob (fault-injecting or spying wrappers of the env's).
func newServiceWithBlob(e *env, cfg control.Config, store control.Store, b control.Blob, clk *testClock, logs *logCounter) *control.Service {
	return newServiceOver(e, cfg, store, e.r.Queue, b, clk, logs.logger())
}

func submitTo(t *testing.T, svc *control.Service, key, body string) string {
	t.Helper()
	res, err := svc.Submit(context.Background(), control.SubmitRequest{Owner: "tester", IdempotencyKey: key, Spec: []byte(body)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.JobID
}

// handled is one message an executor handled, and what it decided.
type handled struct {
	Body   string
	Result feed.Result
}

// receiveVisible receives every message visible on url now, hiding each for
// a minute (longer than any test looks at the queue).
func receiveVisible(t *testing.T, e *env, url string) []queue.Message {
	t.Helper()
	var all []queue.Message
	for i := 0; ; i++ {
		// A one-second long poll returns as soon as a message is there; an
		// empty one means nothing is visible.
		msgs, err := e.r.Queue.Receive(context.Background(), url, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return all
		}
		if i == 100 {
			t.Fatalf("queue %s does not run dry: %d messages and counting", url, len(all))
		}
		all = append(all, msgs...)
	}
}

// work is a synchronous executor host: it handles every message on the
// normal ready queue with r, one at a time, deleting, hiding or leaving
// each as the poller does, until the queue is empty.
func work(t *testing.T, e *env, r *executor.Runner) []handled {
	t.Helper()
	return workIn(t, context.Background(), e, r)
}

// workIn is work with the executor's requests made under ctx.
func workIn(t *testing.T, ctx context.Context, e *env, r *executor.Runner) []handled {
	t.Helper()
	url := e.r.Resources.Queues.Normal
	var out []handled
	for round := 0; ; round++ {
		msgs := receiveVisible(t, e, url)
		if len(msgs) == 0 {
			return out
		}
		if round == 20 {
			t.Fatalf("messages keep coming back after %d handled: %+v", len(out), out)
		}
		for _, m := range msgs {
			extend := func(ctx context.Context, d time.Duration) error {
				return e.r.Queue.ChangeVisibility(ctx, url, m.Receipt, d)
			}
			res := r.Handle(ctx, feed.Delivery{Body: m.Body, SentAt: m.SentAt}, extend)
			switch res.Action {
			case feed.Delete:
				if err := e.r.Queue.DeleteBatch(ctx, url, []string{m.Receipt}); err != nil {
					t.Fatal(err)
				}
			case feed.Hide:
				if err := extend(ctx, res.Delay); err != nil {
					t.Fatal(err)
				}
			}
			out = append(out, handled{Body: m.Body, Result: res})
		}
	}
}

// messagesIn counts a queue's messages: visible, in flight and delayed
// (exact on the emulator).
func messagesIn(t *testing.T, e *env, url string) int {
	t.Helper()
	out, err := sqs.NewFromConfig(e.cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url,
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, v := range out.Attributes {
		k, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("queue attribute %q: %v", v, err)
		}
		n += k
	}
	return n
}

// mustSweep runs one sweep and fails the test on an error.
func mustSweep(t *testing.T, svc *control.Service) control.SweepCounts {
	t.Helper()
	c, err := svc.Sweep(context.Background())
	if err != nil {
		t.Fatalf("sweep: %v (counts %+v)", err, c)
	}
	return c
}

// jobState reads a job's status through the control plane.
func jobState(t *testing.T, svc *control.Service, id string) control.JobStatus {
	t.Helper()
	st, err := svc.Status(context.Background(), "tester", id)
	if err != nil {
		t.Fatalf("status of %s: %v", id, err)
	}
	return st
}

// stageTasks reads every task of a stage from the table.
func stageTasks(t *testing.T, e *env, job string, stage int) []domain.Task {
	t.Helper()
	ctx := context.Background()
	st, err := e.r.Store.StageGet(ctx, job, stage)
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := e.r.Store.TaskListStage(ctx, job, stage, st.Total)
	if err != nil {
		t.Fatal(err)
	}
	j, err := e.r.Store.JobGet(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	return dynamo.WithUnwritten(tasks, job, stage, st.Enqueued, j.Spec.StageRetry(stage).MaxAttempts)
}

// assertCommittedOnce checks that a finished stage of n tasks counted each
// task exactly once and that every task committed the given attempt.
func assertCommittedOnce(t *testing.T, e *env, job string, stage, n, attempt int) {
	t.Helper()
	ctx := context.Background()
	st, err := e.r.Store.StageGet(ctx, job, stage)
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.r.Store.StageProgress(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != n || p.Committed != n || p.Left != 0 || p.Missing != 0 {
		t.Errorf("stage %d: total %d, progress %+v; want %d tasks each counted once", stage, st.Total, p, n)
	}
	tasks := stageTasks(t, e, job, stage)
	if len(tasks) != n {
		t.Errorf("stage %d has %d task records, want %d", stage, len(tasks), n)
	}
	for i, task := range tasks {
		if task.Ref.Partition != i || task.State != sm.TaskSucceeded || task.CommittedAttempt != attempt {
			t.Errorf("task %s: %s, committed attempt %d; want partition %d SUCCEEDED at attempt %d",
				task.Ref, task.State, task.CommittedAttempt, i, attempt)
		}
	}
}
