package emulator

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// bodyRecorder answers every request with an empty JSON object and
// records what the transport would have been handed as the body.
type bodyRecorder struct {
	writeTo []bool
	bodies  []string
}

func (r *bodyRecorder) Do(req *http.Request) (*http.Response, error) {
	_, isWriterTo := req.Body.(io.WriterTo)
	r.writeTo = append(r.writeTo, isWriterTo)
	b, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	r.bodies = append(r.bodies, string(b))
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body: io.NopCloser(strings.NewReader("{}")), Request: req}, nil
}

// The SDK's clients built from AWSConfig hand net/http request bodies
// without WriteTo (see sendBodyWithoutWriteTo), whole, for DynamoDB and
// SQS alike.
func TestSDKBodiesHaveNoWriteTo(t *testing.T) {
	rec := &bodyRecorder{}
	cfg := (&Emulator{URL: "http://127.0.0.1:1", Region: "us-east-1"}).AWSConfig()
	cfg.HTTPClient = rec
	cfg.RetryMaxAttempts = 1
	ctx := context.Background()
	if _, err := dynamodb.NewFromConfig(cfg).PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"),
		Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "k"}}}); err != nil {
		t.Fatalf("PutItem: %v", err)
	}
	if _, err := sqs.NewFromConfig(cfg).SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String("http://127.0.0.1:1/q"),
		MessageBody: aws.String("m")}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	if len(rec.writeTo) != 2 {
		t.Fatalf("%d requests sent, want 2", len(rec.writeTo))
	}
	for i, want := range []string{`"pk":{"S":"k"}`, `"MessageBody":"m"`} {
		if rec.writeTo[i] {
			t.Errorf("request %d: the body has WriteTo", i)
		}
		if !strings.Contains(rec.bodies[i], want) {
			t.Errorf("request %d: body %q, want it to hold %s", i, rec.bodies[i], want)
		}
	}
}
