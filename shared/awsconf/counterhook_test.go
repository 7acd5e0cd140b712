package awsconf

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// The counter counts the lean DynamoDB client's calls as the SDK's: once
// per call, its retries not counted.
func TestCounterCountsTheLeanClient(t *testing.T) {
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if n++; n == 1 {
			w.WriteHeader(500)
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	for _, client := range []string{"sdk", "lean"} {
		n = 0
		cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
			Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""), Retryer: NewRetryer}
		var c Counter
		c.Install(&cfg)
		db, err := ddbwire.ForStore(cfg, client)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String("t"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}}); err != nil {
			t.Fatal(err)
		}
		if got, total := c.Snapshot(); got["DynamoDB.GetItem"] != 1 || total != 1 || n != 2 {
			t.Errorf("%s: counted %v over %d attempts, want one GetItem over 2", client, got, n)
		}
	}
}
