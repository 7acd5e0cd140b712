package awsconf

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Call counts one call of the lean clients (awswire.Hook), as the
// middleware Install adds counts the SDK clients' calls.
func (c *Counter) Call(ctx context.Context, call *awswire.Call, next func(context.Context) error) error {
	c.add(call.Service + "." + call.Operation)
	return next(ctx)
}

// Attempt sends the attempt: the counter counts calls, not attempts.
func (c *Counter) Attempt(_ context.Context, _ *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	return send(req)
}
