package meter

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/awswire"
	"github.com/batchwork/batchwork/shared/dynamo/capacity"
)

// Call counts one call of the lean clients (awswire.Hook) as the
// middleware Install adds counts the SDK's: it asks for the consumed
// capacity, then records the call.
func (m *Meter) Call(ctx context.Context, c *awswire.Call, next func(context.Context) error) error {
	if c.Service == "DynamoDB" {
		c.Input = capacity.Ask(c.Input)
	}
	err := next(ctx)
	m.Record(ctx, c.Service, c.Operation, c.Input, c.Output, err)
	return err
}

// Attempt sends the attempt: the meter counts calls.
func (m *Meter) Attempt(_ context.Context, _ *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	return send(req)
}
