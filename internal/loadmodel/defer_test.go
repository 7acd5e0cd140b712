package loadmodel

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
)

// Deferred accounting ends where accounting as the requests come ends:
// the same totals, in order (an update is sized from the put before it,
// across a Reset), with SQS sends announced as they happen.
func TestDeferredAccountingEqualsImmediate(t *testing.T) {
	t.Parallel()
	tbl := aws.String("tbl")
	put := func(size int) func(*Recorder) {
		return func(r *Recorder) {
			r.Record("DynamoDB", "PutItem", &dynamodb.PutItemInput{TableName: tbl, Item: item("TASK#j#0#0", "000001", size)}, &dynamodb.PutItemOutput{}, nil)
		}
	}
	update := func(r *Recorder) {
		r.Record("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: tbl, Key: key("TASK#j#0#0", "000001"),
			UpdateExpression: aws.String("SET #st = :st"), ExpressionAttributeNames: map[string]string{"#st": "state"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":st": s("CLAIMED")}}, &dynamodb.UpdateItemOutput{}, nil)
	}
	send := func(r *Recorder) {
		r.Record("SQS", "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String("http://h/1/bw-q"),
			Entries: []sqstypes.SendMessageBatchRequestEntry{{MessageBody: aws.String("j/0/0")}}},
			&sqs.SendMessageBatchOutput{Successful: make([]sqstypes.SendMessageBatchResultEntry, 1)}, nil)
	}
	reset := func(r *Recorder) { r.Reset() }
	for _, tc := range []struct {
		name  string
		steps []func(*Recorder)
	}{
		{"a put, then an update sized from it", []func(*Recorder){put(2100), send, update}},
		{"a reset between them keeps what was seen", []func(*Recorder){put(2100), reset, update, send}},
		{"two puts: the update is sized from the last", []func(*Recorder){put(2100), put(100), update}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var now, later Recorder
			var sentNow, sentLater int
			now.OnSend = func(_ string, n int, _ time.Time) { sentNow += n }
			later.OnSend = func(_ string, n int, _ time.Time) { sentLater += n }
			later.Defer(true)
			for _, step := range tc.steps {
				step(&now)
				step(&later)
				if sentLater != sentNow {
					t.Fatalf("deferred: %d messages announced, want %d as they are sent", sentLater, sentNow)
				}
			}
			later.mu.Lock()
			queued := len(later.deferred)
			later.mu.Unlock()
			if queued == 0 {
				t.Fatal("nothing deferred: the test compares nothing")
			}
			if d := cmp.Diff(now.Snapshot(), later.Snapshot()); d != "" {
				t.Errorf("snapshot (-immediate +deferred):\n%s", d)
			}
		})
	}
}
