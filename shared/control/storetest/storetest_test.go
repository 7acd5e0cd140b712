package storetest_test

import (
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/control/storetest"
)

// The suite's Store is part of the control plane's port, so every store
// the control plane runs on can run the suite.
var _ storetest.Store = control.Store(nil)
