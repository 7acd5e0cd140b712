package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/examples"
	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/integration/fntest"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/host"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
)

func TestMain(m *testing.M) { fntest.Main(m, main) }

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) { fntest.MissingEnvironment(t) }

var wired = fntest.Wire

// The executor lists the task names it runs, for the construct at synth
// time.
func TestListTasks(t *testing.T) {
	fntest.ListTasks(t, examples.Names())
}

// The handler built from the environment maps every ready queue's name to
// its URL, runs the registered example functions from an SQS event against
// the deployed resources, and reports only the message it must keep.
func TestHandlerRunsTasksFromSQSEvents(t *testing.T) {
	w, res := wired(t)
	reg := batchwork.NewRegistry()
	register(reg)
	h := host.LambdaHandler(w, executor.PublicRegistry(reg))
	ctx := context.Background()
	for _, url := range []string{res.Queues.High, res.Queues.Normal, res.Queues.Low} {
		if name := url[strings.LastIndex(url, "/")+1:]; h.QueueURLs[name] != url {
			t.Errorf("queue %s maps to %q, want %s", name, h.QueueURLs[name], url)
		}
	}
	sub, err := w.Service.Submit(ctx, control.SubmitRequest{Owner: "tester", IdempotencyKey: "k", Spec: diamond.Spec("fn", 1)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Queue.SendBatch(ctx, res.Queues.Normal, []queue.Send{{Body: "not a task id"}}); err != nil {
		t.Fatal(err)
	}
	var msgs []queue.Message
	for deadline := time.Now().Add(10 * time.Second); len(msgs) < 2 && time.Now().Before(deadline); {
		got, err := w.Queue.Receive(ctx, res.Queues.Normal, 10, time.Second, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, got...)
	}
	if len(msgs) != 2 {
		t.Fatalf("received %d messages, want stage a's task and the stray", len(msgs))
	}
	name := res.Queues.Normal[strings.LastIndex(res.Queues.Normal, "/")+1:]
	var ev events.SQSEvent
	var stray string
	for _, m := range msgs {
		if m.Body == "not a task id" {
			stray = m.ID
		}
		ev.Records = append(ev.Records, events.SQSMessage{
			MessageId: m.ID, ReceiptHandle: m.Receipt, Body: m.Body, EventSource: "aws:sqs",
			EventSourceARN: "arn:aws:sqs:" + os.Getenv("AWS_REGION") + ":123456789012:" + name,
			Attributes:     map[string]string{"SentTimestamp": strconv.FormatInt(m.SentAt.UnixMilli(), 10)},
		})
	}
	resp, err := h.Handle(ctx, ev)
	if err != nil {
		t.Fatalf("handler returned a top-level error: %v", err)
	}
	var failed []string
	for _, f := range resp.BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if !slices.Equal(failed, []string{stray}) {
		t.Fatalf("batch item failures %v, want only the stray message %s", failed, stray)
	}
	st, err := w.Service.Status(ctx, "tester", sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stages[0].Committed != 1 || st.Stages[0].State != "COMPLETED" {
		t.Fatalf("stage a after the event: %+v, want its task committed and the stage COMPLETED", st.Stages[0])
	}
}
