package awsconf

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// TestCounterCountsTheLeanSQSClient: the counter counts the lean SQS client's calls as the SDK's, once per call.
func TestCounterCountsTheLeanSQSClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".ReceiveMessage") {
			_, _ = io.WriteString(w, `{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":"b"}]}`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	seen := map[string]any{}
	for _, client := range []string{"sdk", "lean"} {
		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
		var r Counter
		r.Install(&cfg)
		q, err := sqswire.ForQueues(cfg, client)
		if err != nil {
			t.Fatal(err)
		}
		ctx, url := context.Background(), aws.String(srv.URL+"/q")
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String(strings.Repeat("x", 70<<10))}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: url, Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("h1")}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("h1")}}}); err != nil {
			t.Fatal(err)
		}
		seen[client] = firstOf(r.Snapshot())
	}
	if !reflect.DeepEqual(seen["sdk"], seen["lean"]) || reflect.ValueOf(seen["sdk"]).Len() == 0 {
		t.Errorf("SDK %+v, lean %+v", seen["sdk"], seen["lean"])
	}
}

func firstOf(m map[string]int, _ int) map[string]int { return m }
