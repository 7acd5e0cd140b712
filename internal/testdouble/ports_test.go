package testdouble_test

import (
	"testing"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/storetest"
)

// The doubles answer every port they stand in for, whole: a test that
// swaps one in never finds a capability switched off by its fake.
var (
	_ kernel.Store    = (*testdouble.Store)(nil)
	_ kernel.Queue    = (*testdouble.Queue)(nil)
	_ kernel.Blob     = (*testdouble.Blob)(nil)
	_ executor.Blob   = (*testdouble.Blob)(nil)
	_ feed.Queue      = (*testdouble.Queue)(nil)
	_ storetest.Store = (*testdouble.Store)(nil)
)

// The in-memory store meets the store port's conformance suite, which
// integration runs against dynamo.Store on DynamoDB Local
// (TestDynamoStoreConformance).
func TestFakeStoreConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) storetest.Store { return testdouble.NewStore(&testdouble.Journal{}) })
}
