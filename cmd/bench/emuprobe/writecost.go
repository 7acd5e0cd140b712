package emuprobe

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WriteCost times n sequential 2-item transactions and n
// UpdateItems on bench-only keys, and returns their mean latencies.
func WriteCost(ctx context.Context, cfg aws.Config, table string, n int) (tx, up time.Duration) {
	db := dynamodb.NewFromConfig(cfg)
	k := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: "X"},
		}
	}
	add := func(pk string) *types.Update {
		return &types.Update{
			TableName: &table, Key: k(pk), UpdateExpression: aws.String("ADD n :one"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
		}
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		_, _ = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
			TransactItems: []types.TransactWriteItem{{Update: add("BENCHTX#a")}, {Update: add("BENCHTX#b")}},
		})
	}
	tx = time.Since(start) / time.Duration(n)
	start = time.Now()
	for i := 0; i < n; i++ {
		u := add("BENCHTX#a")
		_, _ = db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &table, Key: u.Key, UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues,
		})
	}
	return tx, time.Since(start) / time.Duration(n)
}

// CountItems counts the table's items; a bench-only scan.
func CountItems(ctx context.Context, cfg aws.Config, table string) (int, error) {
	db := dynamodb.NewFromConfig(cfg)
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, Select: types.SelectCount})
	n := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return n, err
		}
		n += int(out.Count)
	}
	return n, nil
}
