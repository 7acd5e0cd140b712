package loadmodel

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/awswire"
	"github.com/batchwork/batchwork/shared/dynamo/capacity"
)

// Call records one call of the lean clients (awswire.Hook) as the
// middleware Install adds records the SDK's.
func (r *Recorder) Call(ctx context.Context, c *awswire.Call, next func(context.Context) error) error {
	if c.Service == "DynamoDB" {
		c.Input = capacity.Ask(c.Input)
	}
	err := next(ctx)
	r.Record(c.Service, c.Operation, c.Input, c.Output, err)
	return err
}

// Attempt sends the attempt: the recorder models calls.
func (r *Recorder) Attempt(_ context.Context, _ *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	return send(req)
}
