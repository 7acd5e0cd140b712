package integration

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control/storetest"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// dynamo.Store meets the store port's conformance suite, which the unit
// tests run against their in-memory fake (TestFakeStoreConformance): the
// cases share one table, each with its own jobs.
func TestDynamoStoreConformance(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.r.Resources.Table)
	storetest.Run(t, func(*testing.T) storetest.Store { return store })
}
