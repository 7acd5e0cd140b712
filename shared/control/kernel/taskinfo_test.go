package kernel

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lazylog"
)

// TaskInfo writes the bytes TaskLog's logger writes, so a task's lines are
// found by the same fields whichever path wrote them.
func TestTaskInfoWritesTaskLogsLine(t *testing.T) {
	noTime := func(groups []string, a slog.Attr) slog.Attr {
		if len(groups) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	ref := domain.TaskRef{Job: "j-1", Stage: 2, Partition: 7}
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		level slog.Level
		lazy  bool
	}{
		{"no executor", context.Background(), slog.LevelInfo, false},
		{"executor", WithExecutor(context.Background(), "ex-9"), slog.LevelInfo, false},
		{"lazy handler", WithExecutor(context.Background(), "ex-9"), slog.LevelInfo, true},
		{"info dropped", context.Background(), slog.LevelWarn, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var want, got bytes.Buffer
			mk := func(w *bytes.Buffer) *Kernel {
				var h slog.Handler = slog.NewJSONHandler(w, &slog.HandlerOptions{Level: tc.level, ReplaceAttr: noTime})
				if tc.lazy {
					h = lazylog.Wrap(h)
				}
				return New(Config{}, nil, nil, nil, slog.New(h))
			}
			mk(&want).TaskLog(tc.ctx, ref, 3).Info("task committed", "outputs", 4)
			TaskInfo(tc.ctx, mk(&got), ref, 3, "task committed", "outputs", 4)
			if got.String() != want.String() {
				t.Fatalf("TaskInfo wrote\n%s\nTaskLog's logger\n%s", got.String(), want.String())
			}
			if tc.level == slog.LevelInfo && got.Len() == 0 {
				t.Fatal("no line written")
			}
		})
	}
}
