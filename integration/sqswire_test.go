package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// The lean SQS client against the emulator's SQS (AWS JSON 1.0): a batch
// with String, Number and Binary attributes goes in, comes back with its
// attributes and system attributes and passes the MD5 checks, its
// visibility changes and batch delete succeed, a stale handle comes back
// as a failed batch entry, and errors are the SDK's types.
func TestLeanSQSClientOnTheEmulator(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg := emu.AWSConfig()
	sdk := sqs.NewFromConfig(cfg)
	created, err := sdk.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(fmt.Sprintf("sqswire-%d", time.Now().UnixNano()))})
	if err != nil {
		t.Fatal(err)
	}
	q := created.QueueUrl
	lean, err := sqswire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	attrs := map[string]types.MessageAttributeValue{
		"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		"n":           {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"b":           {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 0xfe}},
	}
	sent, err := lean.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String(`{"task":"t\u00e9 0", "é": "ü"}`), MessageAttributes: attrs},
		{Id: aws.String("1"), MessageBody: aws.String("plain")},
	}})
	if err != nil || len(sent.Successful) != 2 || len(sent.Failed) != 0 {
		t.Fatalf("send: %v, %+v", err, sent)
	}
	got := map[string]types.Message{}
	for i := 0; i < 10 && len(got) < 2; i++ {
		out, err := lean.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: q, MaxNumberOfMessages: 10, WaitTimeSeconds: 1, VisibilityTimeout: 30,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount"}})
		if err != nil {
			t.Fatalf("receive: %v", err)
		}
		for _, m := range out.Messages {
			got[aws.ToString(m.Body)] = m
		}
	}
	m0, m1 := got[`{"task":"t\u00e9 0", "é": "ü"}`], got["plain"]
	if m0.ReceiptHandle == nil || m1.ReceiptHandle == nil {
		t.Fatalf("received %+v", got)
	}
	if a := m0.MessageAttributes; aws.ToString(a["traceparent"].StringValue) != aws.ToString(attrs["traceparent"].StringValue) ||
		aws.ToString(a["n"].StringValue) != "42" || !bytes.Equal(a["b"].BinaryValue, attrs["b"].BinaryValue) {
		t.Errorf("attributes %+v", a)
	}
	if m0.Attributes["ApproximateReceiveCount"] != "1" {
		t.Errorf("system attributes %v", m0.Attributes)
	}
	if _, err := lean.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: q, ReceiptHandle: m0.ReceiptHandle, VisibilityTimeout: 60}); err != nil {
		t.Fatalf("change visibility: %v", err)
	}
	cb, err := lean.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: q, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
		{Id: aws.String("0"), ReceiptHandle: m0.ReceiptHandle, VisibilityTimeout: 60}, {Id: aws.String("1"), ReceiptHandle: m1.ReceiptHandle, VisibilityTimeout: 60}}})
	if err != nil || len(cb.Successful) != 2 {
		t.Fatalf("change visibility batch: %v, %+v", err, cb)
	}
	del, err := lean.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: q, Entries: []types.DeleteMessageBatchRequestEntry{
		{Id: aws.String("0"), ReceiptHandle: m0.ReceiptHandle}, {Id: aws.String("1"), ReceiptHandle: m1.ReceiptHandle},
		{Id: aws.String("stale"), ReceiptHandle: aws.String("not-a-handle")}}})
	if err != nil || len(del.Successful) != 2 || len(del.Failed) != 1 || aws.ToString(del.Failed[0].Id) != "stale" || aws.ToString(del.Failed[0].Code) == "" {
		t.Fatalf("delete: %v, %+v", err, del)
	}
	// Errors: the SDK's types, from both clients.
	_, lerr := lean.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: q, Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("x"), MessageBody: aws.String("a")}, {Id: aws.String("x"), MessageBody: aws.String("b")}}})
	var notDistinct *types.BatchEntryIdsNotDistinct
	if !errors.As(lerr, &notDistinct) {
		t.Errorf("duplicate ids: %v (%T)", lerr, errors.Unwrap(lerr))
	}
	gone := aws.String(aws.ToString(q) + "-gone")
	_, lerr = lean.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: gone})
	_, serr := sdk.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: gone})
	var lq, sq *types.QueueDoesNotExist
	if !errors.As(lerr, &lq) || !errors.As(serr, &sq) || lq.ErrorCode() != sq.ErrorCode() {
		t.Errorf("missing queue: lean %v, SDK %v", lerr, serr)
	}
}
