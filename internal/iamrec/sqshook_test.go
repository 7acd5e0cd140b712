package iamrec

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/sqswire/sqswiretest"
)

// TestRecorderSeesTheLeanSQSClientActions: the recorder records the lean SQS client's actions as the SDK's, for the function the context names.
func TestRecorderSeesTheLeanSQSClientActions(t *testing.T) {
	seen := map[string]any{}
	for _, client := range sqswiretest.Clients {
		r := New()
		sqswiretest.Exercise(t, WithFunction(context.Background(), "fn"), client, strings.Repeat("x", 70<<10), func(cfg *aws.Config) { r.Install(cfg) })
		seen[client] = r.Uses()
	}
	if !reflect.DeepEqual(seen["sdk"], seen["lean"]) || reflect.ValueOf(seen["sdk"]).Len() == 0 {
		t.Errorf("SDK %+v, lean %+v", seen["sdk"], seen["lean"])
	}
}
