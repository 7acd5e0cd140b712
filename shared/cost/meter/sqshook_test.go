package meter

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/sqswire"
)

// TestMeterSeesTheLeanSQSClient: the meter counts the lean SQS client's
// calls for their job as it counts the SDK's: a sent message by its body,
// a received one's handle remembered, its delete and visibility change
// counted to the same job.
func TestMeterSeesTheLeanSQSClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".ReceiveMessage"):
			_, _ = io.WriteString(w, `{"Messages":[{"MessageId":"m1","ReceiptHandle":"h1","Body":"job:j1"}]}`)
		case strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".SendMessageBatch"):
			_, _ = io.WriteString(w, `{"Successful":[{"Id":"0","MessageId":"m1"}]}`)
		default:
			_, _ = io.WriteString(w, `{}`)
		}
	}))
	defer srv.Close()
	counts := map[string]cost.Counts{}
	for _, client := range []string{"sdk", "lean"} {
		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
		m := New(jobOf)
		m.Install(&cfg)
		q, err := sqswire.ForQueues(cfg, client)
		if err != nil {
			t.Fatal(err)
		}
		ctx, url := context.Background(), aws.String(srv.URL+"/q")
		if _, err := q.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: url, Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("job:j1")}}}); err != nil {
			t.Fatal(err)
		}
		out, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url})
		if err != nil || len(out.Messages) != 1 {
			t.Fatal(err)
		}
		if _, err := q.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{QueueUrl: url, ReceiptHandle: aws.String("h1"), VisibilityTimeout: 9}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: url, Entries: []types.DeleteMessageBatchRequestEntry{{Id: aws.String("0"), ReceiptHandle: aws.String("h1")}}}); err != nil {
			t.Fatal(err)
		}
		counts[client] = m.Take("j1")
	}
	if counts["lean"] != counts["sdk"] || counts["sdk"] == (cost.Counts{}) {
		t.Errorf("counted for j1: SDK %+v, lean %+v", counts["sdk"], counts["lean"])
	}
}
