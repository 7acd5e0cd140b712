package awsconf

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/ddbwire"
)

// Call counts one call of the lean DynamoDB client (ddbwire.Hook), as the
// middleware Install adds counts the SDK clients' calls.
func (c *Counter) Call(ctx context.Context, call *ddbwire.Call, next func(context.Context) error) error {
	c.add(call.Service + "." + call.Operation)
	return next(ctx)
}

// Attempt sends the attempt: the counter counts calls, not attempts.
func (c *Counter) Attempt(_ context.Context, _ *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	return send(req)
}
