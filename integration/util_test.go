package integration

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// countItems scans the test's table; only tests scan, never the product.
func countItems(ctx context.Context, e *env) (int, error) {
	out, err := dynamodb.NewFromConfig(e.cfg).Scan(ctx, &dynamodb.ScanInput{TableName: &e.r.Resources.Table})
	if err != nil {
		return 0, err
	}
	return int(out.Count), nil
}
