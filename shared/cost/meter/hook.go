package meter

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo/capacity"
)

// Call counts one call of the lean DynamoDB client (ddbwire.Hook) as the
// middleware Install adds counts the SDK's: it asks for the consumed
// capacity, then records the call.
func (m *Meter) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	c.Input = capacity.Ask(c.Input)
	err := next(ctx)
	m.Record(ctx, c.Service, c.Operation, c.Input, c.Output, err)
	return err
}

// Attempt sends the attempt: the meter counts calls.
func (m *Meter) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	return send(req)
}
