package ddbwire

import (
	"github.com/batchwork/batchwork/shared/dynamo"
)

// API is the store's port; both clients implement it.
type API = dynamo.API

var _ API = (*Client)(nil)
