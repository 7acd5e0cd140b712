package faults

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// TestLeanClientGetsTheSameFaults: through its hook on the lean DynamoDB
// client, each kind of fault reaches the caller as through the SDK's
// client: the same typed error (a cancellation with one reason per item),
// the same retries, the same requests reaching the server (a lost
// answer's write applied, its retry meeting the condition it set).
func TestLeanClientGetsTheSameFaults(t *testing.T) {
	conditionFailed := func(op string, n int) (int, string) {
		if op == "UpdateItem" && n > 1 {
			return 400, `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`
		}
		return 200, "{}"
	}
	for _, c := range []struct {
		name     string
		rule     Rule
		attempts int
		reply    func(op string, n int) (int, string)
		call     func(context.Context, ddbwire.API) error
		check    func(error) bool
		hits     int
	}{
		{"transaction conflict", Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: Conflict, Count: 1}, 1, nil,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.TransactWriteItems(ctx, transact(3))
				return err
			},
			func(err error) bool {
				var tc *types.TransactionCanceledException
				return errors.As(err, &tc) && len(tc.CancellationReasons) == 3
			}, 0},
		{"item conflict", Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: Conflict, Count: 1}, 3, nil,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.UpdateItem(ctx, update(true))
				return err
			},
			func(err error) bool { return as[*types.TransactionConflictException](err) }, 0},
		{"throttles retried", Rule{Service: "DynamoDB", Kind: Throttle, Count: 2}, 3, nil,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.UpdateItem(ctx, update(true))
				return err
			},
			func(err error) bool { return err == nil }, 1},
		{"5xx exhausts attempts", Rule{Service: "DynamoDB", Kind: ServerError, Count: 5}, 3, nil,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: update(true).TableName, Key: update(true).Key})
				return err
			},
			func(err error) bool { var m *retry.MaxAttemptsError; return errors.As(err, &m) && isRetryable(m.Err) }, 0},
		{"lost answer meets its own condition", Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: Lost, Count: 1}, 3, conditionFailed,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.UpdateItem(ctx, update(true))
				return err
			},
			func(err error) bool { return as[*types.ConditionalCheckFailedException](err) }, 2},
		{"in progress retried", Rule{Service: "DynamoDB", Kind: InProgress, Count: 1}, 3, nil,
			func(ctx context.Context, db ddbwire.API) error {
				_, err := db.TransactWriteItems(ctx, transact(2))
				return err
			},
			func(err error) bool { return err == nil }, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, client := range []string{"sdk", "lean"} {
				srv := newFakeAWS(t)
				srv.reply = c.reply
				inj := New(1, c.rule)
				cfg := config(srv.URL, c.attempts)
				inj.Install(&cfg)
				db, err := ddbwire.ForStore(cfg, client)
				if err != nil {
					t.Fatal(err)
				}
				err = c.call(context.Background(), db)
				var op *smithy.OperationError
				if !c.check(err) || (err != nil && !errors.As(err, &op)) {
					t.Errorf("%s: error %v", client, err)
				}
				if srv.total() != c.hits || inj.Total() == 0 {
					t.Errorf("%s: server got %d requests, want %d; %d faults injected", client, srv.total(), c.hits, inj.Total())
				}
			}
		})
	}
}
