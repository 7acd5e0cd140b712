package awsconf

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/sqswire/sqswiretest"
)

// TestCounterCountsTheLeanSQSClient: the counter counts the lean SQS client's calls as the SDK's, once per call.
func TestCounterCountsTheLeanSQSClient(t *testing.T) {
	seen := map[string]map[string]int{}
	for _, client := range sqswiretest.Clients {
		var r Counter
		sqswiretest.Exercise(t, context.Background(), client, strings.Repeat("x", 70<<10), func(cfg *aws.Config) { r.Install(cfg) })
		seen[client], _ = r.Snapshot()
	}
	if !reflect.DeepEqual(seen["sdk"], seen["lean"]) || len(seen["sdk"]) == 0 {
		t.Errorf("SDK %+v, lean %+v", seen["sdk"], seen["lean"])
	}
}
