package host

import (
	"context"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/internal/metrics"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
)

// claimLatency wraps an OnClaim hook (next, may be nil) to record the
// ready-to-claimed latency: from the message's sending to its claim.
// Without a recorder it is next.
func claimLatency(rec *metrics.Recorder, next func(control.Claim, time.Time)) func(control.Claim, time.Time) {
	if rec == nil {
		return next
	}
	return func(c control.Claim, sentAt time.Time) {
		if !sentAt.IsZero() && sentAt.Unix() > 0 {
			p := spec.PriorityNormal
			if c.Spec != nil && c.Task.Ref.Stage < len(c.Spec.Stages) {
				p = c.Spec.StagePriority(c.Task.Ref.Stage)
			}
			rec.ReadyToClaimed(p, time.Since(sentAt))
		}
		if next != nil {
			next(c, sentAt)
		}
	}
}

// flushAfter flushes rec when each Lambda invocation returns: the
// process may be frozen, or never thawed, after it.
func flushAfter(rec *metrics.Recorder, h func(context.Context, events.SQSEvent) (events.SQSEventResponse, error)) func(context.Context, events.SQSEvent) (events.SQSEventResponse, error) {
	return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
		defer tracing.Flush(ctx) // spans too (shared/tracing)
		if rec != nil {
			defer rec.Flush()
		}
		return h(ctx, ev)
	}
}

// runMetrics flushes rec every metrics.FlushEvery until stop is called,
// which flushes what is left and returns once written.
func runMetrics(rec *metrics.Recorder) (stop func()) {
	if rec == nil {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		rec.Run(done, metrics.FlushEvery)
	}()
	return func() {
		close(done)
		<-exited
	}
}
