package awsconf

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/faults"
)

// A single-item write that a transaction in flight on its item refused
// (TransactionConflictException) applied nothing, so the control plane's
// retryer sends it again, as it does a throttle: the SDK's standard rules
// do not, and each caller of UpdateItem, PutItem or DeleteItem would
// otherwise fail its step on what AWS produces under contention.
func TestRetryerRetriesSingleItemTransactionConflicts(t *testing.T) {
	var sent atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		sent.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, "{}")
	}))
	defer srv.Close()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	for op, call := range map[string]func(context.Context, *dynamodb.Client) error{
		"UpdateItem": func(ctx context.Context, db *dynamodb.Client) error {
			_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("t"), Key: key, UpdateExpression: aws.String("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}}})
			return err
		},
		"PutItem": func(ctx context.Context, db *dynamodb.Client) error {
			_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key})
			return err
		},
		"DeleteItem": func(ctx context.Context, db *dynamodb.Client) error {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key})
			return err
		},
	} {
		t.Run(op, func(t *testing.T) {
			cfg := aws.Config{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
				Credentials: credentials.NewStaticCredentialsProvider("AKID", "SECRET", "")}
			Harden(&cfg)
			inj := faults.New(1, faults.Rule{Service: "DynamoDB", Operation: op, Kind: faults.Conflict, Count: 2})
			inj.Install(&cfg)
			before := sent.Load()
			if err := call(context.Background(), dynamodb.NewFromConfig(cfg)); err != nil {
				t.Fatalf("%s after two conflicts: %v", op, err)
			}
			if inj.Total() != 2 || sent.Load()-before != 1 {
				t.Fatalf("%d conflicts injected, %d requests sent; want 2 and 1", inj.Total(), sent.Load()-before)
			}
		})
	}
}
