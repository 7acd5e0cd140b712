package loadmodel

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/sqswire/sqswiretest"
)

// TestRecorderSeesTheLeanSQSClient: the recorder models the lean SQS client's calls as the SDK's: one request each, the sent payload in SQS's 64 KB chunks.
func TestRecorderSeesTheLeanSQSClient(t *testing.T) {
	seen := map[string]any{}
	for _, client := range sqswiretest.Clients {
		var r Recorder
		sqswiretest.Exercise(t, context.Background(), client, strings.Repeat("x", 70<<10), func(cfg *aws.Config) { r.Install(cfg) })
		seen[client] = r.Snapshot().Ops
	}
	if !reflect.DeepEqual(seen["sdk"], seen["lean"]) || reflect.ValueOf(seen["sdk"]).Len() == 0 {
		t.Errorf("SDK %+v, lean %+v", seen["sdk"], seen["lean"])
	}
}
