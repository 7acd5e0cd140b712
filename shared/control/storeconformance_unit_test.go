package control

import (
	"testing"

	"github.com/batchwork/batchwork/shared/control/storetest"
)

// The in-memory fake meets the store port's conformance suite, which
// integration runs against dynamo.Store on DynamoDB Local
// (TestDynamoStoreConformance).
func TestFakeStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) storetest.Store { return newFakeStore(&journal{}) })
}
