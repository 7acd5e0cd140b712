package integration

import (
	"bytes"
	"context"
	"io"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func io_nop(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// countItems scans the test's table; only tests scan, never the product.
func countItems(ctx context.Context, e *env) (int, error) {
	out, err := dynamodb.NewFromConfig(e.cfg).Scan(ctx, &dynamodb.ScanInput{TableName: &e.r.Resources.Table})
	if err != nil {
		return 0, err
	}
	return int(out.Count), nil
}
