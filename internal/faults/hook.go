package faults

import (
	"context"
	"net/http"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Call passes the lean clients' call on, as faults are per attempt, then
// reopens some of the messages an SQS ReceiveMessage returned (Duplicate),
// as duplicateStep does after the SDK's client's.
func (i *Injector) Call(ctx context.Context, c *awswire.Call, next func(context.Context) error) error {
	err := next(ctx)
	if err == nil && c.Service == "SQS" && c.Operation == opReceive && i.enabled.Load() {
		i.duplicate(ctx, c.Input, c.Output)
	}
	return err
}

// Attempt injects a fault into one attempt of a lean client
// (awswire.Hook), decided as for the SDK's clients: an error fault is
// answered with the HTTP response the service would have sent, which
// the client turns into its typed error; a lost response is sent and,
// when the server answered 2xx, replaced by a connection reset, which the
// client's retryer retries as it would a real one.
func (i *Injector) Attempt(_ context.Context, c *awswire.Call, req *http.Request, send awswire.Send) (*http.Response, error) {
	if !i.enabled.Load() {
		return send(req)
	}
	f, ok := i.decide(c.Service, c.Operation, c.Input)
	if !ok {
		return send(req)
	}
	if f.kind != Lost {
		return f.resp.httpResponse(req.Method), nil
	}
	resp, err := send(req)
	if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
		i.mu.Lock()
		f.rule.fired--
		i.mu.Unlock()
		return resp, err
	}
	discard(resp.Body)
	i.mu.Lock()
	i.counts[f.key]++
	i.total++
	i.mu.Unlock()
	return nil, resetURLError(req.Method, req.URL.Host, req.URL.String())
}
