package main

import (
	"context"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// Call notes the jobs a transaction of the store's lean DynamoDB client
// wrote (ddbwire.Hook), as jobWrites' middleware notes the SDK's; the
// lean SQS client's calls pass through unnoted.
func (w *jobWrites) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	err := next(ctx)
	tx, ok := c.Input.(*dynamodb.TransactWriteItemsInput)
	if err != nil || !ok {
		return err
	}
	w.note(tx, w.now())
	return nil
}

// Attempt sends the attempt.
func (w *jobWrites) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	return send(req)
}
