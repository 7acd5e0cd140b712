package ddbwire

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// API is the store's DynamoDB port (shared/dynamo.API), which both the
// SDK's client and Client implement.
type API interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	BatchGetItem(context.Context, *dynamodb.BatchGetItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	BatchExecuteStatement(context.Context, *dynamodb.BatchExecuteStatementInput, ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error)
}

// EnvClient names the variable that picks the store's client: "sdk" for
// the SDK's (to compare, e.g. in make bench), "" or "lean" for this
// package's.
const EnvClient = "BATCHWORK_DYNAMO_CLIENT"

// ForStore returns the client the store uses, by choice (EnvClient's
// value).
func ForStore(cfg aws.Config, choice string) (API, error) {
	switch choice {
	case "", "lean":
		return New(cfg)
	case "sdk":
		return dynamodb.NewFromConfig(cfg), nil
	}
	return nil, fmt.Errorf("%s=%q: want lean or sdk", EnvClient, choice)
}
