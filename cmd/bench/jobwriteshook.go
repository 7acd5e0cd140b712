package main

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// Call notes the jobs a transaction of the store's lean DynamoDB client
// wrote (ddbwire.Hook), as jobWrites' middleware notes the SDK's.
func (w *jobWrites) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	err := next(ctx)
	tx, ok := c.Input.(*dynamodb.TransactWriteItemsInput)
	if err != nil || !ok {
		return err
	}
	done := w.now()
	for _, it := range tx.TransactItems {
		if it.Put == nil {
			continue
		}
		pk, _ := it.Put.Item["pk"].(*ddbtypes.AttributeValueMemberS)
		sk, _ := it.Put.Item["sk"].(*ddbtypes.AttributeValueMemberS)
		if pk != nil && sk != nil && sk.Value == "JOB" && strings.HasPrefix(pk.Value, "JOB#") {
			w.mu.Lock()
			w.at[strings.TrimPrefix(pk.Value, "JOB#")] = done
			w.mu.Unlock()
		}
	}
	return nil
}

// Attempt sends the attempt.
func (w *jobWrites) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	return send(req)
}
