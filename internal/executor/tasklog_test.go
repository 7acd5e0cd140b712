package executor

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lazylog"
)

// A task's deferred loggers write the fields (and bytes) the Withs they
// stand for wrote: `batchwork logs` finds a task's lines by them.
func TestTaskLoggerFields(t *testing.T) {
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	ref := domain.TaskRef{Job: "j-1", Stage: 2, Partition: 7}
	for _, tc := range []struct {
		name string
		ctx  context.Context
	}{
		{"no executor", context.Background()},
		{"executor", control.WithExecutor(context.Background(), "ex-9")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			mk := func(w *bytes.Buffer) *slog.Logger {
				return lazylog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: noTime}))
			}
			w := mk(&want).With("job_id", ref.Job, "stage", ref.Stage, "partition", ref.Partition, "task", ref.String())
			if id := control.ExecutorOf(tc.ctx); id != "" {
				w = w.With("executor_id", id)
			}
			w.Info("before the claim", "n", 1)
			w.With("attempt", 3, "stage_name", "map").Info("after it", "n", 2)

			g := taskLogger(tc.ctx, mk(&got), ref)
			g.Info("before the claim", "n", 1)
			attemptLogger(g, 3, "map").Info("after it", "n", 2)
			if got.String() != want.String() {
				t.Fatalf("deferred loggers wrote\n%s\nthe Withs\n%s", got.String(), want.String())
			}
		})
	}
}
