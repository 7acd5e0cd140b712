package feed

import (
	"context"
	"time"
)

// DefaultContinueMargin is how long before its invocation's deadline the
// Lambda host asks a checkpointing task to checkpoint and return
// (domain.ErrContinue): time to seal its outputs and hand the task on.
const DefaultContinueMargin = 60 * time.Second

type continueMarginKey struct{}

// WithContinueMargin makes the runner ask checkpointing tasks to
// continue in a new invocation margin before ctx's deadline (the Lambda
// host sets it; a context without a deadline never continues).
func WithContinueMargin(ctx context.Context, margin time.Duration) context.Context {
	return context.WithValue(ctx, continueMarginKey{}, margin)
}

// ContinueMarginFrom is the margin WithContinueMargin set on ctx; false
// when the host set none (its tasks never continue).
func ContinueMarginFrom(ctx context.Context) (time.Duration, bool) {
	margin, ok := ctx.Value(continueMarginKey{}).(time.Duration)
	return margin, ok
}
