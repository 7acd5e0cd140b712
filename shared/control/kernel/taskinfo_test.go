package kernel

import (
	"bytes"
	"context"
	"io"
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
			if tc.name == "executor" && got.String() != executorLine {
				t.Fatalf("TaskInfo wrote\n%s\nwant\n%s", got.String(), executorLine)
			}
		})
	}
}

// executorLine is a task's line, byte for byte: its fields and their
// order are what log searches match.
const executorLine = `{"level":"INFO","msg":"task committed","job_id":"j-1","stage":2,"task":"j-1/2/7","partition":7,"attempt":3,"executor_id":"ex-9","outputs":4}` + "\n"

func BenchmarkTaskInfo(b *testing.B) {
	k := New(Config{}, nil, nil, nil, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	ctx := WithExecutor(context.Background(), "ex-9")
	ref := domain.TaskRef{Job: "j1a1fd8fa5144ffa078bd8", Stage: 0, Partition: 1234}
	b.ReportAllocs()
	for b.Loop() {
		TaskInfo(ctx, k, ref, 1, "task committed", "outputs", 1)
	}
}
