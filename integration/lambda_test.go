package integration

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// queueAttr reads one attribute of a queue.
func queueAttr(t *testing.T, e *env, url string, name sqstypes.QueueAttributeName) string {
	t.Helper()
	out, err := sqs.NewFromConfig(e.cfg).GetQueueAttributes(context.Background(), &sqs.GetQueueAttributesInput{
		QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{name},
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Attributes[string(name)]
}

// sqsEvent is the event Lambda's SQS event source would deliver for msgs,
// received from the queue at url.
func sqsEvent(t *testing.T, e *env, url string, msgs []queue.Message) events.SQSEvent {
	t.Helper()
	arn := queueAttr(t, e, url, sqstypes.QueueAttributeNameQueueArn)
	var ev events.SQSEvent
	for _, m := range msgs {
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.ID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs", EventSourceARN: arn,
			Attributes: map[string]string{
				"SentTimestamp":           strconv.FormatInt(m.SentAt.UnixMilli(), 10),
				"ApproximateReceiveCount": strconv.Itoa(m.ReceiveCount),
			},
		})
	}
	return ev
}

// The Lambda host reports exactly the messages Lambda must keep as batch
// item failures: a retry waiting out its backoff, a duplicate of a task
// another executor holds, and a message that names no task. A committed
// task and a stale duplicate of a finished task are not failures (Lambda
// deletes them). The kept messages are hidden on the right queue for as
// long as they must wait.
func TestLambdaHandlerReportsBatchItemFailures(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error {
		if t.Partition == 1 {
			return errors.New("bad record in partition 1")
		}
		_, err := fmt.Fprintf(t.Out, "%s/%s/%d attempt %d\n", t.Job, t.Stage, t.Partition, t.Attempt)
		return err
	})
	e := newEnv(t, reg, envOptions{noRun: true})
	ctx := context.Background()
	url := e.r.Resources.Queues.Normal
	id := e.submit("lambda", []byte(`{"name":"lambda","stages":[{"name":"s","task":"work","partitions":{"count":4},
	  "retry":{"maxAttempts":3,"backoff":"10m"}}]}`))
	ref := func(p int) domain.TaskRef { return domain.TaskRef{Job: id, Stage: 0, Partition: p} }

	// Task 2 finished before this batch (its message is a stale
	// duplicate); task 3 is held by a live executor elsewhere.
	c2 := mustClaim(t, e.r.Service, ref(2))
	putOutput(t, e, c2, "two\n")
	if err := e.r.Service.Commit(ctx, c2, control.CommitResult{Outputs: 1}); err != nil {
		t.Fatal(err)
	}
	held := mustClaim(t, e.r.Service, ref(3))
	if err := e.r.Queue.SendBatch(ctx, url, []queue.Send{{Body: "not a task id"}}); err != nil {
		t.Fatal(err)
	}
	// Received with a short visibility, so a message the handler does not
	// hide comes back within the test.
	var msgs []queue.Message
	for deadline := time.Now().Add(10 * time.Second); len(msgs) < 5 && time.Now().Before(deadline); {
		got, err := e.r.Queue.Receive(ctx, url, 10, time.Second, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got...)
	}
	if len(msgs) != 5 {
		t.Fatalf("received %d messages, want 5 (4 tasks and one stray)", len(msgs))
	}
	idOf := map[string]string{} // body -> message id
	for _, m := range msgs {
		idOf[m.Body] = m.ID
	}

	run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger()}
	h := &feed.LambdaHandler{
		Handler: run, CP: run.CP, Log: run.Log,
		Queue: e.r.Queue,
		QueueURLs: map[string]string{
			queueName(e.r.Resources.Queues.High): e.r.Resources.Queues.High,
			queueName(url):                       url,
			queueName(e.r.Resources.Queues.Low):  e.r.Resources.Queues.Low,
		},
	}
	resp, err := h.Handle(ctx, sqsEvent(t, e, url, msgs))
	if err != nil {
		t.Fatalf("handler returned a top-level error: %v", err)
	}
	var got []string
	for _, f := range resp.BatchItemFailures {
		got = append(got, f.ItemIdentifier)
	}
	want := []string{idOf[ref(1).String()], idOf[ref(3).String()], idOf["not a task id"]}
	sort.Strings(got)
	sort.Strings(want)
	if !slices.Equal(got, want) {
		t.Fatalf("batch item failures %v, want %v (task 1's retry, task 3's duplicate, the stray)", got, want)
	}

	for p, w := range []struct {
		state     sm.TaskState
		attempt   int
		committed int
	}{{sm.TaskSucceeded, 1, 1}, {sm.TaskReady, 1, 0}, {sm.TaskSucceeded, 1, 1}, {sm.TaskClaimed, 1, 0}} {
		task, err := e.r.Store.TaskGet(ctx, ref(p))
		if err != nil {
			t.Fatal(err)
		}
		if task.State != w.state || task.Attempt != w.attempt || task.CommittedAttempt != w.committed {
			t.Errorf("task %d: %s attempt %d committed %d, want %s attempt %d committed %d",
				p, task.State, task.Attempt, task.CommittedAttempt, w.state, w.attempt, w.committed)
		}
		if p == 1 && task.LastError != "bad record in partition 1" {
			t.Errorf("task 1 error %q, want the function's error", task.LastError)
		}
		if p == 3 && task.Token != held.Task.Token {
			t.Errorf("task 3's claim changed hands: the duplicate must not touch a live claim")
		}
	}

	// Only the stray returns after its 5 s. The retry (10 min) and the
	// held task's copy (until its holder's lease) stay hidden, and so do
	// the two finished tasks' until the invocation has ended and the event
	// source deleted them: the handler changed their visibility. The loop
	// outlasts the 5 s, so a message left unhidden would be seen.
	var back []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		got, err := e.r.Queue.Receive(ctx, url, 10, time.Second, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range got {
			back = append(back, m.Body)
		}
	}
	sort.Strings(back)
	if want := []string{"not a task id"}; !slices.Equal(back, want) {
		t.Errorf("messages visible again %v, want only %v", back, want)
	}
}

func queueName(url string) string { return url[strings.LastIndex(url, "/")+1:] }

// One owner's task cannot cost another owner an attempt on the Lambda
// executor. A batch holds the tasks of two owners (the owners are the
// jobs' submitters, read from the job records: the messages name only
// tasks). The invocation runs alice's, whose task breaks (its output
// passes the cap, or it panics), and hands bob's back before anything
// runs: bob's task is never claimed there, and his message is visible
// again at once although it was received with an hour's visibility (the
// queue's is 90 minutes). Alice's attempt fails with a clear error and
// retries; bob's next batch runs his task as its first attempt.
func TestLambdaIsolatesOwners(t *testing.T) {
	t.Parallel()
	const alice, bob = "arn:aws:iam::123456789012:role/alice", "arn:aws:iam::123456789012:role/bob"
	cases := []struct {
		name      string
		breakTask func(t *batchwork.Task) error
		wantError string // alice's attempt's error
	}{
		{"output past the cap", func(t *batchwork.Task) error {
			_, err := t.Out.Write(make([]byte, 2<<10))
			return err
		}, "task output too large: an attempt may buffer at most 1024 bytes of outputs in memory before publishing them; " +
			"give each task less to write (a smaller splitSize, or more partitions)"},
		{"panic", func(t *batchwork.Task) error { panic("alice's bad record") }, "task panicked: alice's bad record"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := batchwork.NewRegistry()
			reg.Register("work", func(ctx context.Context, task *batchwork.Task) error {
				if task.Params["who"] == "alice" {
					return tc.breakTask(task)
				}
				_, err := fmt.Fprintf(task.Out, "%s/%s/%d attempt %d\n", task.Job, task.Stage, task.Partition, task.Attempt)
				return err
			})
			e := newEnv(t, reg, envOptions{noRun: true})
			ctx := context.Background()
			url := e.r.Resources.Queues.Normal
			submit := func(owner, who string) domain.TaskRef {
				res, err := e.r.Service.Submit(ctx, control.SubmitRequest{Owner: owner, IdempotencyKey: who, Spec: []byte(`{"name":"` + who +
					`","stages":[{"name":"s","task":"work","partitions":{"count":1,"params":[{"who":"` + who + `"}]},"retry":{"maxAttempts":3,"backoff":"10m"}}]}`)})
				if err != nil {
					t.Fatalf("submit as %s: %v", who, err)
				}
				return domain.TaskRef{Job: res.JobID}
			}
			aliceTask, bobTask := submit(alice, "alice"), submit(bob, "bob")
			receive := func(n int) []queue.Message {
				t.Helper()
				var msgs []queue.Message
				for deadline := time.Now().Add(10 * time.Second); len(msgs) < n && time.Now().Before(deadline); {
					got, err := e.r.Queue.Receive(ctx, url, 10, time.Second, time.Hour)
					if err != nil {
						t.Fatal(err)
					}
					msgs = append(msgs, got...)
				}
				return msgs
			}
			msgs := receive(2)
			if len(msgs) != 2 {
				t.Fatalf("received %d messages, want alice's and bob's", len(msgs))
			}
			// Alice's first: with one delivery each, the first record's
			// owner runs.
			slices.SortFunc(msgs, func(a, b queue.Message) int {
				return cmp.Compare(boolInt(a.Body != aliceTask.String()), boolInt(b.Body != aliceTask.String()))
			})
			run := &executor.Runner{CP: e.r.Service, Blob: e.r.Blob, Registry: executor.PublicRegistry(reg), Log: newLogCounter().logger(), MaxOutputBytes: 1 << 10}
			h := &feed.LambdaHandler{
				Handler: run, CP: run.CP, Log: run.Log,
				Queue: e.r.Queue, QueueURLs: map[string]string{queueName(url): url},
			}
			resp, err := h.Handle(ctx, sqsEvent(t, e, url, msgs))
			if err != nil {
				t.Fatalf("handler returned a top-level error: %v", err)
			}
			var failed []string
			for _, f := range resp.BatchItemFailures {
				failed = append(failed, f.ItemIdentifier)
			}
			slices.Sort(failed)
			want := []string{msgs[0].ID, msgs[1].ID} // alice's retry waits out its backoff; bob's is handed back
			slices.Sort(want)
			if !slices.Equal(failed, want) {
				t.Errorf("batch item failures %v, want both messages %v kept", failed, want)
			}
			task, err := e.r.Store.TaskGet(ctx, aliceTask)
			if err != nil {
				t.Fatal(err)
			}
			if task.State != sm.TaskReady || task.Attempt != 1 || task.LastError != tc.wantError {
				t.Errorf("alice's task: %s attempt %d error %q; want READY for its retry after attempt 1 failed with %q",
					task.State, task.Attempt, task.LastError, tc.wantError)
			}
			if task, err = e.r.Store.TaskGet(ctx, bobTask); err != nil {
				t.Fatal(err)
			}
			if task.State != sm.TaskReady || task.Attempt != 0 {
				t.Fatalf("bob's task after alice's batch: %s attempt %d; want READY and never claimed", task.State, task.Attempt)
			}
			// Bob's message is back at once; alice's waits out its backoff.
			again := receive(1)
			if len(again) != 1 || again[0].Body != bobTask.String() {
				t.Fatalf("visible again: %+v; want bob's message alone", again)
			}
			if resp, err = h.Handle(ctx, sqsEvent(t, e, url, again)); err != nil || len(resp.BatchItemFailures) != 0 {
				t.Fatalf("bob's batch: %+v, %v; want his task done", resp, err)
			}
			if task, err = e.r.Store.TaskGet(ctx, bobTask); err != nil {
				t.Fatal(err)
			}
			if task.State != sm.TaskSucceeded || task.Attempt != 1 || task.CommittedAttempt != 1 {
				t.Errorf("bob's task: %s attempt %d committed %d; want his first attempt committed", task.State, task.Attempt, task.CommittedAttempt)
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
