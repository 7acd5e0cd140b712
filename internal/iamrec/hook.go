package iamrec

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Call records the actions of one call of a lean client (DynamoDB's or
// SQS's: awswire.Hook), as the middleware Install adds records the SDK's.
func (r *Recorder) Call(ctx context.Context, c *awswire.Call, next func(context.Context) error) error {
	if fn := FunctionOf(ctx); fn != "" {
		r.record(fn, Actions(c.Service, c.Operation, c.Input))
	}
	return next(ctx)
}

// Attempt sends the attempt: actions are per call.
func (r *Recorder) Attempt(_ context.Context, _ *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	return send(req)
}
