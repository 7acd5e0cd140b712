package meter

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/sqswire/sqswiretest"
)

// TestMeterSeesTheLeanSQSClient: the meter counts the lean SQS client's
// calls for their job as it counts the SDK's: a sent message by its body,
// a received one's handle remembered, its delete and visibility change
// counted to the same job.
func TestMeterSeesTheLeanSQSClient(t *testing.T) {
	counts := map[string]cost.Counts{}
	for _, client := range sqswiretest.Clients {
		m := New(jobOf)
		sqswiretest.Exercise(t, context.Background(), client, "job:j1", func(cfg *aws.Config) { m.Install(cfg) })
		counts[client] = m.Take("j1")
	}
	if counts["lean"] != counts["sdk"] || counts["sdk"] == (cost.Counts{}) {
		t.Errorf("counted for j1: SDK %+v, lean %+v", counts["sdk"], counts["lean"])
	}
}
