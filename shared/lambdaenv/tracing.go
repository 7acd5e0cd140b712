package lambdaenv

import (
	"context"
	"log/slog"
	"os"

	"github.com/batchwork/batchwork/shared/tracing"
)

// setupTracing installs the tracer provider the OTEL_* variables describe
// (shared/tracing), named after the function (OTEL_SERVICE_NAME wins).
// A process keeps it for its life: Lambda functions flush it at the end
// of each invocation (tracing.Flush), and a long-running host when it
// stops.
func setupTracing(ctx context.Context, log *slog.Logger) error {
	service := os.Getenv("AWS_LAMBDA_FUNCTION_NAME")
	if service == "" {
		service = "batchwork"
	}
	_, err := tracing.Setup(ctx, os.Getenv, service, func(err error) { log.Warn("export spans", "err", err) })
	return err
}
