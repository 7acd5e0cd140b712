package executor

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/tracing"
)

// traceAttempt puts a claimed attempt under its task's span (the record's
// traceparent, or the message's for a record written before it had one)
// and records the steps already behind it: the message's time in the
// queue, from its sending to its receipt, and the claim. Every later step
// of the attempt is a child of the same span (traceStep), so each attempt,
// redelivered or retried, joins the task's trace. While tracing is off it
// returns ctx.
func traceAttempt(ctx context.Context, c control.Claim, d feed.Delivery, received, claimed time.Time) context.Context {
	if !tracing.Enabled() {
		return ctx
	}
	parent := c.Trace
	if parent == "" {
		parent = d.Trace
	}
	ctx = tracing.Parent(ctx, parent)
	if !d.SentAt.IsZero() && d.SentAt.Before(received) {
		tracing.Record(ctx, "batchwork.queue.wait", d.SentAt, received, attemptAttrs(c)...)
	}
	tracing.Record(ctx, "batchwork.claim", claimed, time.Now(), attemptAttrs(c)...)
	return ctx
}

// traceStep starts the span of one step of an attempt (the run of the
// user's function, the output writes, the commit), under its task's span.
func traceStep(ctx context.Context, name string, c control.Claim) (context.Context, trace.Span) {
	if !tracing.Enabled() {
		return tracing.Start(ctx, name)
	}
	return tracing.Start(ctx, name, attemptAttrs(c)...)
}

func attemptAttrs(c control.Claim) []attribute.KeyValue {
	return []attribute.KeyValue{tracing.JobKey.String(c.Task.Ref.Job), tracing.StageKey.String(c.StageName()),
		tracing.PartitionKey.Int(c.Task.Ref.Partition), tracing.AttemptKey.Int(c.Task.Attempt)}
}
