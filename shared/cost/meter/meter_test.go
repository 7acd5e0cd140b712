package meter

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/cost"
)

// jobOf reads "job:<id>" bodies.
func jobOf(body string) string {
	if j, ok := strings.CutPrefix(body, "job:"); ok {
		return j
	}
	return ""
}

func TestRecordAttributesByContext(t *testing.T) {
	ctx := WithJob(context.Background(), "j1")
	refused := &types.ConditionalCheckFailedException{}
	for _, tc := range []struct {
		name             string
		ctx              context.Context
		service, op      string
		in, out          any
		err              error
		want, unassigned cost.Counts
	}{
		{"reported units", ctx, "DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{},
			&dynamodb.UpdateItemOutput{ConsumedCapacity: &types.ConsumedCapacity{CapacityUnits: aws.Float64(3)}}, nil,
			cost.Counts{DynamoRequests: 1, DynamoWriteUnits: 3}, cost.Counts{}},
		{"a refused write is billed its minimum", ctx, "DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{}, nil, refused,
			cost.Counts{DynamoRequests: 1, DynamoWriteUnits: 1}, cost.Counts{}},
		{"a throttled request is not billed", ctx, "DynamoDB", "PutItem", &dynamodb.PutItemInput{}, nil, errors.New("throttled"),
			cost.Counts{DynamoRequests: 1}, cost.Counts{}},
		{"a transaction: two units an item at least", ctx, "DynamoDB", "TransactWriteItems",
			&dynamodb.TransactWriteItemsInput{TransactItems: make([]types.TransactWriteItem, 3)},
			&dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{{CapacityUnits: aws.Float64(2)}}}, nil,
			cost.Counts{DynamoRequests: 1, DynamoWriteUnits: 6}, cost.Counts{}},
		{"an eventually consistent read", ctx, "DynamoDB", "GetItem", &dynamodb.GetItemInput{}, &dynamodb.GetItemOutput{}, nil,
			cost.Counts{DynamoRequests: 1, DynamoReadUnits: 0.5}, cost.Counts{}},
		{"S3 PUT", ctx, "S3", "PutObject", &s3.PutObjectInput{}, nil, nil, cost.Counts{S3Tier1: 1}, cost.Counts{}},
		{"S3 GET", ctx, "S3", "GetObject", &s3.GetObjectInput{}, nil, nil, cost.Counts{S3Tier2: 1}, cost.Counts{}},
		{"S3 DELETE", ctx, "S3", "DeleteObject", &s3.DeleteObjectInput{}, nil, nil, cost.Counts{S3Free: 1}, cost.Counts{}},
		{"Lambda", ctx, "Lambda", "Invoke", nil, nil, nil, cost.Counts{LambdaInvokes: 1}, cost.Counts{}},
		{"events", ctx, "EventBridge", "PutEvents", &eventbridge.PutEventsInput{Entries: make([]ebtypes.PutEventsRequestEntry, 2)}, nil, nil,
			cost.Counts{Events: 2}, cost.Counts{}},
		{"no job in the context", context.Background(), "S3", "ListObjectsV2", &s3.ListObjectsV2Input{}, nil, nil,
			cost.Counts{}, cost.Counts{S3Tier1: 1}},
		{"an empty poll", context.Background(), "SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{}, &sqs.ReceiveMessageOutput{}, nil,
			cost.Counts{}, cost.Counts{SQSRequests: 1}},
		{"a send: the body's job wins", context.Background(), "SQS", "SendMessage",
			&sqs.SendMessageInput{MessageBody: aws.String("job:j1")}, nil, nil, cost.Counts{SQSRequests: 1}, cost.Counts{}},
		{"a large send: 64 KB chunks", ctx, "SQS", "SendMessage",
			&sqs.SendMessageInput{MessageBody: aws.String(strings.Repeat("x", 65<<10))}, nil, nil, cost.Counts{SQSRequests: 2}, cost.Counts{}},
		{"a batch send is shared", context.Background(), "SQS", "SendMessageBatch",
			&sqs.SendMessageBatchInput{Entries: []sqstypes.SendMessageBatchRequestEntry{
				{MessageBody: aws.String("job:j1")}, {MessageBody: aws.String("job:j2")}, {MessageBody: aws.String("job:j1")}, {MessageBody: aws.String("timer")}}},
			// the timer's share goes to the jobs active: j1 and j2
			nil, nil, cost.Counts{SQSRequests: 0.625}, cost.Counts{}},
		{"unknown services count nothing", ctx, "STS", "GetCallerIdentity", nil, nil, nil, cost.Counts{}, cost.Counts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(jobOf)
			m.Record(tc.ctx, tc.service, tc.op, tc.in, tc.out, tc.err)
			if got := m.Take("j1"); got != tc.want {
				t.Errorf("j1: %+v, want %+v", got, tc.want)
			}
			if got := m.Unattributed(); got != tc.unassigned {
				t.Errorf("unattributed: %+v, want %+v", got, tc.unassigned)
			}
			if got := m.Take("j1"); !got.IsZero() {
				t.Errorf("taken twice: %+v", got)
			}
		})
	}
}

// A receive of messages of several jobs is shared between them, and so
// are the batched deletes and visibility changes of its messages, found
// by their receipt handles.
func TestSharedBatches(t *testing.T) {
	m := New(jobOf)
	ctx := context.Background()
	msgs := []sqstypes.Message{
		{Body: aws.String("job:a"), ReceiptHandle: aws.String("h1")},
		{Body: aws.String("job:a"), ReceiptHandle: aws.String("h2")},
		{Body: aws.String("job:b"), ReceiptHandle: aws.String("h3")},
		{Body: aws.String("job:c"), ReceiptHandle: aws.String("h4")},
	}
	m.Record(ctx, "SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{}, &sqs.ReceiveMessageOutput{Messages: msgs}, nil)
	m.Record(ctx, "SQS", "ChangeMessageVisibility", &sqs.ChangeMessageVisibilityInput{ReceiptHandle: aws.String("h3")}, nil, nil)
	m.Record(ctx, "SQS", "DeleteMessageBatch", &sqs.DeleteMessageBatchInput{Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{ReceiptHandle: aws.String("h1")}, {ReceiptHandle: aws.String("h3")}}}, nil, nil)
	// A handle deleted is forgotten: a second delete is no job's, shared
	// between the jobs active.
	m.Record(ctx, "SQS", "DeleteMessage", &sqs.DeleteMessageInput{ReceiptHandle: aws.String("h1")}, nil, nil)
	for job, want := range map[string]float64{"a": 0.5 + 0.5 + 1.0/3, "b": 0.25 + 1 + 0.5 + 1.0/3, "c": 0.25 + 1.0/3} {
		if got := m.Take(job).SQSRequests; math.Abs(got-want) > 1e-9 {
			t.Errorf("job %s: %v SQS requests, want %v", job, got, want)
		}
	}
	if got := m.Unattributed().SQSRequests; got != 0 {
		t.Errorf("unattributed: %v, want 0", got)
	}
}

// Requests no job's are shared between the jobs active in the last
// ActiveWindow; with none active they are no job's.
func TestIdleRequestsShared(t *testing.T) {
	m := New(jobOf)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	bg := context.Background()
	poll := func() {
		m.Record(bg, "SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{}, &sqs.ReceiveMessageOutput{}, nil)
	}
	poll() // no job yet
	m.Record(WithJob(bg, "a"), "S3", "GetObject", nil, nil, nil)
	m.Record(WithJob(bg, "b"), "S3", "GetObject", nil, nil, nil)
	poll()
	now = now.Add(ActiveWindow / 2)
	m.Record(WithJob(bg, "b"), "S3", "GetObject", nil, nil, nil)
	now = now.Add(ActiveWindow/2 + time.Second) // a is idle now
	poll()
	now = now.Add(2 * ActiveWindow) // both are
	poll()
	for job, want := range map[string]float64{"a": 0.5, "b": 1.5} {
		if got := m.Take(job).SQSRequests; got != want {
			t.Errorf("job %s: %v SQS requests, want %v", job, got, want)
		}
	}
	if got := m.Unattributed().SQSRequests; got != 2 {
		t.Errorf("unattributed: %v, want 2", got)
	}
}

func TestPutAndNil(t *testing.T) {
	m := New(nil)
	m.Put("j", cost.Counts{ComputeSeconds: 2})
	m.Put("j", cost.Counts{ComputeSeconds: 1, GBSeconds: 1})
	m.Put("", cost.Counts{ComputeSeconds: 5}) // no job: dropped
	if got := m.Pending("j"); got != (cost.Counts{ComputeSeconds: 3, GBSeconds: 1}) {
		t.Fatalf("pending: %+v", got)
	}
	var none *Meter // counts nothing, and never fails
	none.Record(context.Background(), "S3", "PutObject", nil, nil, nil)
	none.Put("j", cost.Counts{S3Tier1: 1})
	if got := none.Take("j"); !got.IsZero() {
		t.Fatalf("nil meter took %+v", got)
	}
	if JobOf(WithJob(context.Background(), "j")) != "j" || JobOf(context.Background()) != "" {
		t.Fatal("WithJob/JobOf")
	}
}

// The store writes task records as PartiQL INSERTs, 25 to a
// BatchExecuteStatement: the meter asks for its capacity and bills what
// DynamoDB reports, and no less than a unit a statement.
func TestBatchExecuteStatementBilled(t *testing.T) {
	stmts := make([]types.BatchStatementRequest, 25)
	for _, tc := range []struct {
		name     string
		reported []types.ConsumedCapacity
		want     float64
	}{
		{"nothing reported: a unit a statement", nil, 25},
		{"reported", []types.ConsumedCapacity{{CapacityUnits: aws.Float64(30)}}, 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(nil)
			ctx := WithJob(context.Background(), "j")
			m.Record(ctx, "DynamoDB", "BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{Statements: stmts},
				&dynamodb.BatchExecuteStatementOutput{ConsumedCapacity: tc.reported}, nil)
			if got := m.Take("j"); got != (cost.Counts{DynamoRequests: 1, DynamoWriteUnits: tc.want}) {
				t.Errorf("%+v, want 1 request of %v write units", got, tc.want)
			}
		})
	}
}
