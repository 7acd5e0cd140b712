// Package sqswiretest drives the queue port's five calls through the SDK's
// SQS client and the lean one, for the hooks (fault injection aside) that
// must see both alike.
package sqswiretest

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// QueueURL is the queue the calls name; both clients send them to the
// config's endpoint, the loopback server, whatever host it names.
const QueueURL = "https://sqs.us-east-1.amazonaws.com/123456789012/q"

// Clients are the clients sqswire.ForQueues picks by name.
var Clients = []string{"sdk", "lean"}

// Exercise makes SendMessageBatch (one message of body), ReceiveMessage
// (answered with one message of body, handle "h1"), ChangeMessageVisibility,
// ChangeMessageVisibilityBatch and DeleteMessageBatch of that handle, with
// ctx, through the client named, built from a config install has prepared,
// against a loopback server that answers each as SQS would.
func Exercise(t testing.TB, ctx context.Context, client, body string, install func(*aws.Config)) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch target := r.Header.Get("X-Amz-Target"); {
		case strings.HasSuffix(target, ".ReceiveMessage"):
			_, _ = io.WriteString(w, `{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":`+strconv.Quote(body)+`}]}`)
		case strings.HasSuffix(target, ".SendMessageBatch"):
			_, _ = io.WriteString(w, `{"Successful":[{"Id":"0","MessageId":"m1"}]}`)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
	install(&cfg)
	q, err := sqswire.ForQueues(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	url, handle := aws.String(QueueURL), aws.String("h1")
	if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String(body)}}}); err != nil {
		t.Fatal(err)
	}
	if out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url}); err != nil || len(out.Messages) != 1 {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: handle, VisibilityTimeout: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: handle}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: handle}}}); err != nil {
		t.Fatal(err)
	}
}
