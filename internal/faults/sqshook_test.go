package faults

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/sqswire"
)

// TestLeanSQSClientGetsTheSameFaults: through its hook on the lean SQS
// client, each kind of SQS fault reaches the caller as through the SDK's
// client: the same typed error, the same retries, the same requests
// reaching the server (a lost answer's delete sent again), and the same
// duplicate deliveries (the received message reopened with its handle).
func TestLeanSQSClientGetsTheSameFaults(t *testing.T) {
	received := func(op string, _ int) (int, string) {
		if op == "ReceiveMessage" {
			return 200, `{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":"a"}]}`
		}
		return 200, "{}"
	}
	receive := func(ctx context.Context, q queue.API, url string) error {
		_, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
		return err
	}
	for _, c := range []struct {
		name     string
		rule     Rule
		attempts int
		reply    func(op string, n int) (int, string)
		call     func(ctx context.Context, q queue.API, url string) error
		check    func(error) bool
		hits     map[string]int
	}{
		{"throttles retried", Rule{Service: "SQS", Kind: Throttle, Count: 2}, 3, nil, receive,
			func(err error) bool { return err == nil }, map[string]int{"ReceiveMessage": 1}},
		{"throttles exhaust attempts", Rule{Service: "SQS", Operation: "ReceiveMessage", Kind: Throttle, Count: 5}, 3, nil, receive,
			func(err error) bool {
				var m *retry.MaxAttemptsError
				var ae smithy.APIError
				return errors.As(err, &m) && errors.As(err, &ae) && (ae.ErrorCode() == "RequestThrottled" || ae.ErrorCode() == "ThrottlingException")
			}, map[string]int{}},
		{"5xx exhausts attempts", Rule{Service: "SQS", Kind: ServerError, Count: 5}, 3, nil,
			func(ctx context.Context, q queue.API, url string) error {
				_, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String("h"), VisibilityTimeout: 5})
				return err
			},
			func(err error) bool { var m *retry.MaxAttemptsError; return errors.As(err, &m) && isRetryable(m.Err) }, map[string]int{}},
		{"lost delete sent again", Rule{Service: "SQS", Operation: "DeleteMessageBatch", Kind: Lost, Count: 1}, 3, nil,
			func(ctx context.Context, q queue.API, url string) error {
				_, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url),
					Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("h")}}})
				return err
			},
			func(err error) bool { return err == nil }, map[string]int{"DeleteMessageBatch": 2}},
		{"duplicate delivery", Rule{Service: "SQS", Kind: Duplicate, Rate: 1, Count: 1}, 3, received, receive,
			func(err error) bool { return err == nil }, map[string]int{"ReceiveMessage": 1, "ChangeMessageVisibility": 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			codes := map[string]string{}
			for _, client := range []string{"sdk", "lean"} {
				srv := newFakeAWS(t)
				srv.reply = c.reply
				inj := New(1, c.rule)
				cfg := config(srv.URL, c.attempts)
				inj.Install(&cfg)
				q, err := sqswire.ForQueues(cfg, client)
				if err != nil {
					t.Fatal(err)
				}
				err = c.call(context.Background(), q, srv.URL+"/q")
				var op *smithy.OperationError
				if !c.check(err) || (err != nil && !errors.As(err, &op)) {
					t.Errorf("%s: error %v", client, err)
				}
				var ae smithy.APIError
				if errors.As(err, &ae) {
					codes[client] = ae.ErrorCode()
				}
				for opName, want := range c.hits {
					if got := srv.hitCount(opName); got != want {
						t.Errorf("%s: server got %d %s, want %d", client, got, opName, want)
					}
				}
				if want := sumOf(c.hits); srv.total() != want || inj.Total() == 0 {
					t.Errorf("%s: server got %d requests, want %d; %d faults injected", client, srv.total(), want, inj.Total())
				}
				if c.rule.Kind == Duplicate {
					srv.mu.Lock()
					last := srv.bodies[len(srv.bodies)-1]
					srv.mu.Unlock()
					if last["ReceiptHandle"] != "h1" || inj.Counts()["SQS.ReceiveMessage duplicate"] != 1 {
						t.Errorf("%s: reopened %v, counts %v", client, last, inj.Counts())
					}
				}
			}
			if codes["sdk"] != codes["lean"] {
				t.Errorf("error codes: SDK %q, lean %q", codes["sdk"], codes["lean"])
			}
		})
	}
}

func sumOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
