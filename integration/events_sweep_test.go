package integration

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
)

// While the bus refuses every event (an EventBridge outage, a broken bus
// policy), the outbox records pile up in the sweep index, each due since
// its change. They must not hold the head of their index shards: the sweep
// looks at a bounded number of records per shard, oldest first, and a task
// behind them (here one whose message was lost) must still be repaired.
// Once the bus is back, the events are published: none is lost.
func TestFailingEventsDoNotStarveTheSweep(t *testing.T) {
	t.Parallel()
	inj := faults.New(1, faults.Rule{Service: "EventBridge", Operation: "PutEvents", Kind: faults.ServerError, Rate: 1})
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, t *batchwork.Task) error { return nil })
	e := newEnv(t, reg, envOptions{noRun: true, faults: inj})
	ctx := context.Background()
	cfg := testTimings
	cfg.SweepLimit = 1 // one record per shard and run: the head of each shard
	clk, logs := newTestClock(), newLogCounter()
	svc := newService(e, cfg, e.r.Store, e.r.Queue, clk, logs.logger())
	db := dynamodb.NewFromConfig(e.cfg)
	table := e.r.Resources.Table

	// An event of earlier than the task below, in the task's index shard
	// (written as the outbox writes one: its own partition, in the index
	// from its time).
	id := submitTo(t, svc, "lost", oneStage("lost", "work", 1))
	task, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &table, ConsistentRead: aws.Bool(true), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "TASK#" + id + "#0#0"}, "sk": &types.AttributeValueMemberS{Value: "000000"},
	}})
	if err != nil || task.Item[dynamo.Schema.DueShard] == nil {
		t.Fatalf("the task's index entry: %v, %v", task.Item, err)
	}
	const stuck = "test.stuck-event"
	ms := &types.AttributeValueMemberN{Value: strconv.FormatInt(clk.Now().UnixMilli(), 10)}
	if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "OBX#" + stuck}, "sk": &types.AttributeValueMemberS{Value: "OBX"},
		"dt": &types.AttributeValueMemberS{Value: "Batchwork Test"}, "ev": &types.AttributeValueMemberS{Value: `{"jobId":"` + id + `"}`},
		"at": ms, dynamo.Schema.DueShard: task.Item[dynamo.Schema.DueShard], dynamo.Schema.Due: ms,
	}}); err != nil {
		t.Fatal(err)
	}
	// A job ended and deleted while the bus refuses its events: its
	// events are still published later (they carry their whole detail),
	// and only then are their outbox records deleted.
	gone := submitTo(t, svc, "gone", oneStage("gone", "work", 1))
	if _, err := svc.Cancel(ctx, "tester", gone); err != nil {
		t.Fatal(err)
	}
	if d, err := svc.DeleteJob(ctx, "tester", gone); err != nil || !d.Complete {
		t.Fatalf("delete: %+v, %v", d, err)
	}
	goneEvents := []string{events.SubmittedID(gone), events.EndedID(gone)}
	for _, ev := range goneEvents {
		if _, found, err := e.r.Store.OutboxEvent(ctx, ev); err != nil || !found {
			t.Fatalf("event %s of the deleted job while the bus refuses it: found=%v, %v; want it kept", ev, found, err)
		}
	}
	// The task's message is lost.
	for _, m := range receiveVisible(t, e, e.r.Resources.Queues.Normal) {
		if err := e.r.Queue.DeleteBatch(ctx, e.r.Resources.Queues.Normal, []string{m.Receipt}); err != nil {
			t.Fatal(err)
		}
	}

	clk.Advance(testTimings.StuckAfter + dynamo.OutboxGrace + time.Second)
	requeued := 0
	for i := 0; i < 6 && requeued == 0; i++ {
		c, _ := svc.Sweep(ctx) // the bus's errors are the sweep's
		requeued += c.Requeued
	}
	if requeued != 1 {
		t.Fatalf("the task whose message was lost was not requeued in 6 sweeps (%d): the refused events hold its shard", requeued)
	}

	inj.SetEnabled(false)
	clk.Advance(time.Hour)
	// One record per shard and run: a few runs reach every event.
	pending := func() []string {
		var left []string
		for _, ev := range append(goneEvents, stuck) {
			if _, found, err := e.r.Store.OutboxEvent(ctx, ev); err != nil || found {
				left = append(left, ev)
			}
		}
		return left
	}
	for i := 0; len(pending()) > 0; i++ {
		if i == 10 {
			t.Fatalf("refused events %v not published in %d sweeps after the bus came back", pending(), i)
		}
		if _, err := svc.Sweep(ctx); err != nil {
			t.Fatalf("sweep with the bus back: %v", err)
		}
	}
}
