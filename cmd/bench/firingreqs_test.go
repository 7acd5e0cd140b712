package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// TestReqLabelsSeeTheLeanClient: the store's DynamoDB client is the lean
// one, so the per-item attribution of a firing's requests must see its
// calls as it sees the SDK's.
func TestReqLabelsSeeTheLeanClient(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""))}
	var l reqLabels
	l.install(&cfg)
	for name, db := range map[string]interface {
		GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}{"sdk": dynamodb.NewFromConfig(cfg), "lean": must(ddbwire.New(cfg))} {
		before := l.snapshot()
		_, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"),
			Key: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "SCH#o"}, "sk": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		for k, v := range l.snapshot() {
			if strings.HasPrefix(k, "GetItem ") {
				n += v - before[k]
			}
		}
		if n != 1 {
			t.Errorf("%s client: %d GetItem labels counted, want 1", name, n)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
