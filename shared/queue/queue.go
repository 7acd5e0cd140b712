// Package queue is the SQS adapter: batched sends and deletes, long-polling
// receives and visibility changes (the task lease).
package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// API is the slice of the SQS client the adapter uses.
type API interface {
	SendMessageBatch(context.Context, *sqs.SendMessageBatchInput, ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(context.Context, *sqs.DeleteMessageBatchInput, ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	ChangeMessageVisibility(context.Context, *sqs.ChangeMessageVisibilityInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	ChangeMessageVisibilityBatch(context.Context, *sqs.ChangeMessageVisibilityBatchInput, ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// MaxDelay is SQS's longest DelaySeconds; longer backoffs are kept in the
// task record and enforced at claim.
const MaxDelay = 15 * time.Minute

// MaxVisibility is SQS's longest visibility timeout.
const MaxVisibility = 12 * time.Hour

// Message is a received message.
type Message struct {
	Queue        string // queue URL
	ID           string
	Receipt      string
	Body         string
	ReceiveCount int
	SentAt       time.Time
	// Trace is the traceparent the message carried (Send.Trace), "" if
	// none.
	Trace string
}

// Send is one message to send.
type Send struct {
	Body  string
	Delay time.Duration
	// Trace, when set, is a W3C traceparent (shared/tracing) sent as the
	// message attribute TraceAttribute: the span of the task the body
	// names, so its attempts join its trace.
	Trace string
}

// TraceAttribute is the message attribute that carries Send.Trace.
const TraceAttribute = "traceparent"

// traceAttrs is a Send's message attributes: none without a trace.
func traceAttrs(m Send) map[string]types.MessageAttributeValue {
	if m.Trace == "" {
		return nil
	}
	return map[string]types.MessageAttributeValue{TraceAttribute: {DataType: aws.String("String"), StringValue: aws.String(m.Trace)}}
}

// Queue is the SQS adapter.
type Queue struct{ api API }

// New returns a queue adapter.
func New(api API) *Queue { return &Queue{api: api} }

// SendBatch sends msgs to url in batches of ten, retrying entries SQS
// reports as failed a few times before giving up.
func (q *Queue) SendBatch(ctx context.Context, url string, msgs []Send) error {
	// Batches go out a few at a time: a 1,000-task chunk is 100 requests,
	// and their order does not matter.
	sem := make(chan struct{}, sendConcurrency)
	errs := make(chan error, (len(msgs)+9)/10)
	var wg sync.WaitGroup
	for lo := 0; lo < len(msgs); lo += 10 {
		sem <- struct{}{}
		wg.Add(1)
		go func(chunk []Send) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := q.sendTen(ctx, url, chunk); err != nil {
				errs <- err
			}
		}(msgs[lo:min(lo+10, len(msgs))])
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when no batch failed
}

const sendConcurrency = 8

// sendTen sends up to ten messages in one batch, retrying entries that
// failed on their own.
func (q *Queue) sendTen(ctx context.Context, url string, chunk []Send) error {
	for try := 0; len(chunk) > 0; try++ {
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			d := min(max(m.Delay, 0), MaxDelay)
			entries[i] = types.SendMessageBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(m.Body),
				DelaySeconds:      int32((d + time.Second - 1) / time.Second),
				MessageAttributes: traceAttrs(m),
			}
		}
		out, err := q.api.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return fmt.Errorf("send %d messages: %w", len(chunk), err)
		}
		if len(out.Failed) == 0 {
			return nil
		}
		if try == 4 {
			return fmt.Errorf("send messages: %d entries failed, first: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
		var retry []Send
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			retry = append(retry, chunk[i])
		}
		chunk = retry
	}
	return nil
}

// Receive long-polls url for up to max messages (at most 10).
func (q *Queue) Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]Message, error) {
	out, err := q.api.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: &url, MaxNumberOfMessages: int32(min(max(maxN, 1), 10)),
		WaitTimeSeconds:   int32(wait / time.Second),
		VisibilityTimeout: int32(visibility / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{
			types.MessageSystemAttributeNameApproximateReceiveCount, types.MessageSystemAttributeNameSentTimestamp,
		},
		MessageAttributeNames: []string{TraceAttribute},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", url, err)
	}
	msgs := make([]Message, len(out.Messages))
	for i, m := range out.Messages {
		n, _ := strconv.Atoi(m.Attributes[string(types.MessageSystemAttributeNameApproximateReceiveCount)])
		sent, _ := strconv.ParseInt(m.Attributes[string(types.MessageSystemAttributeNameSentTimestamp)], 10, 64)
		msgs[i] = Message{Queue: url, ID: aws.ToString(m.MessageId), Receipt: aws.ToString(m.ReceiptHandle),
			Body: aws.ToString(m.Body), ReceiveCount: n, SentAt: time.UnixMilli(sent)}
		if a, ok := m.MessageAttributes[TraceAttribute]; ok {
			msgs[i].Trace = aws.ToString(a.StringValue)
		}
	}
	return msgs, nil
}

// ChangeVisibility hides a received message for d more from now: the lease
// extension of a heartbeat, or the delay before a retry.
func (q *Queue) ChangeVisibility(ctx context.Context, url, receipt string, d time.Duration) error {
	d = min(max(d, 0), MaxVisibility)
	_, err := q.api.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl: &url, ReceiptHandle: &receipt, VisibilityTimeout: int32((d + time.Second - 1) / time.Second),
	})
	if err != nil {
		return fmt.Errorf("change visibility: %w", err)
	}
	return nil
}

// ChangeVisibilityBatch hides received messages of one queue for d more
// from now, ten per request: an executor keeping its running tasks'
// messages hidden. Every chunk is tried whatever the others do. It
// returns the receipts that can never change again (SQS answers
// ReceiptHandleIsInvalid or MessageNotInflight: the message was received
// anew elsewhere, or deleted), and the other failures. A failed entry only
// means its message comes back early; its claim is still held, so the
// next claimer hides it again.
func (q *Queue) ChangeVisibilityBatch(ctx context.Context, url string, receipts []string, d time.Duration) (gone []string, err error) {
	secs := int32((min(max(d, 0), MaxVisibility) + time.Second - 1) / time.Second)
	var errs []error
	for lo := 0; lo < len(receipts); lo += 10 {
		chunk := receipts[lo:min(lo+10, len(receipts))]
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r), VisibilityTimeout: secs}
		}
		out, err := q.api.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("change visibility of %d messages: %w", len(chunk), err))
			continue
		}
		for _, f := range out.Failed {
			i, _ := strconv.Atoi(aws.ToString(f.Id))
			switch code := aws.ToString(f.Code); {
			case i >= len(chunk):
			case code == "ReceiptHandleIsInvalid" || code == "MessageNotInflight" || strings.HasSuffix(code, ".MessageNotInflight"):
				gone = append(gone, chunk[i])
			default:
				errs = append(errs, fmt.Errorf("change visibility: %s: %s", code, aws.ToString(f.Message)))
			}
		}
	}
	return gone, errors.Join(errs...)
}

// DeleteBatch deletes received messages of one queue, ten per request.
func (q *Queue) DeleteBatch(ctx context.Context, url string, receipts []string) error {
	for lo := 0; lo < len(receipts); lo += 10 {
		chunk := receipts[lo:min(lo+10, len(receipts))]
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, r := range chunk {
			entries[i] = types.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String(r)}
		}
		out, err := q.api.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: &url, Entries: entries})
		if err != nil {
			return fmt.Errorf("delete %d messages: %w", len(chunk), err)
		}
		if len(out.Failed) > 0 {
			// A failed delete only means the message comes back; the claim
			// it carries is rejected then. Report it for the logs.
			return fmt.Errorf("delete messages: %d entries failed, first: %s", len(out.Failed), aws.ToString(out.Failed[0].Message))
		}
	}
	return nil
}
