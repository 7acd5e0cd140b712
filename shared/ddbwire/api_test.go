package ddbwire_test

import (
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// API is the store's port; both clients implement it.
type API = dynamo.API

var _ API = (*ddbwire.Client)(nil)
