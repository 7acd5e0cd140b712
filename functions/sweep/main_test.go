package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/integration/fntest"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
)

func TestMain(m *testing.M) { fntest.Main(m, main) }

// Without its configuration the function exits at once with status 1,
// naming every missing variable and no other.
func TestMissingEnvironment(t *testing.T) { fntest.MissingEnvironment(t) }

var wired = fntest.Wire

// The handler built from the environment sweeps the deployed table and
// dead-letter queue: a dead letter naming no live task is dropped.
func TestHandlerSweepsTheDeployment(t *testing.T) {
	w, res := wired(t)
	h := handler(w)
	ctx := context.Background()
	if err := w.Queue.SendBatch(ctx, res.Queues.DLQ, []queue.Send{{Body: "j0123456789abcdef012345/0/0"}}); err != nil {
		t.Fatal(err)
	}
	// EventBridge's scheduled event, as the rule delivers it.
	out, err := h(ctx, json.RawMessage(`{"version":"0","source":"aws.events","detail-type":"Scheduled Event","detail":{}}`))
	c, _ := out.(control.SweepCounts)
	if err != nil {
		t.Fatalf("sweep: %v (counts %+v)", err, c)
	}
	if c.DeadLettered != 1 {
		t.Fatalf("sweep counts %+v, want the one dead letter handled", c)
	}
	left, err := w.Queue.Receive(ctx, res.Queues.DLQ, 10, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("dead-letter queue still holds %v", left)
	}
}

// An SQS event is a batch of timer messages: a firing of a schedule that
// no longer exists is dropped and a body that is no timer message is
// dropped too (neither can ever succeed), so no item is reported failed;
// neither runs a sweep.
func TestHandlerConsumesTimerMessages(t *testing.T) {
	w, _ := wired(t)
	h := handler(w)
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "gone", EventSource: "aws:sqs", Body: `{"owner":"o","firing":"s0123456789abcdef01234@2020-01-01T00:00:00Z","bucket":"2020-01-01T00:00Z#03"}`},
		{MessageId: "junk", EventSource: "aws:sqs", Body: "j0123456789abcdef012345/0/0"},
	}}
	raw, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := out.(events.SQSEventResponse)
	if !ok {
		t.Fatalf("handler returned %T %+v, want an SQS batch response", out, out)
	}
	if len(resp.BatchItemFailures) != 0 {
		t.Fatalf("batch item failures %+v, want none", resp.BatchItemFailures)
	}
}

// ECS's event of a Fargate task stopped for memory (as the construct's
// rule delivers it: infra/batchwork/oom.go) marks the task's executor
// killed for memory on its liveness record, and runs no sweep.
func TestHandlerMarksAnExecutorStoppedForMemory(t *testing.T) {
	w, res := wired(t)
	h := handler(w)
	ctx := context.Background()
	const ev = `{"version":"0","source":"aws.ecs","detail-type":"ECS Task State Change","detail":{` +
		`"taskArn":"arn:aws:ecs:us-east-1:123456789012:task/bw/feedc0de0042","lastStatus":"STOPPED","stoppedReason":"Essential container in task exited",` +
		`"containers":[{"name":"executor","reason":"OutOfMemoryError: Container killed due to memory usage"}]}}`
	out, err := h(ctx, json.RawMessage(ev))
	if err != nil || out != nil {
		t.Fatalf("handler: %v, %v; want nothing (no sweep)", out, err)
	}
	m, err := dynamo.New(dynamodb.NewFromConfig(w.AWS), res.Table).ExecutorMemory(ctx, control.ExecutorIDForECSTask("arn:aws:ecs:us-east-1:123456789012:task/bw/feedc0de0042"))
	if err != nil {
		t.Fatal(err)
	}
	if m.Killed != "executor: OutOfMemoryError: Container killed due to memory usage" {
		t.Fatalf("executor record %+v, want it marked killed for memory", m)
	}
}
