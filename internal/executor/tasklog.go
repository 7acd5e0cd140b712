package executor

import (
	"context"
	"log/slog"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lazylog"
)

// taskLogger is the logger of one task message's lines, the task
// function's own included (Task.Log): the job, stage and task ids, and the
// id of the executor (a long-polling slot pool, a Lambda invocation) that
// handles it, as recorded on the attempt. The attempt is added once the
// claim grants it. `batchwork logs` finds a job's and a task's lines by
// these fields (shared/logs).
func taskLogger(ctx context.Context, base *slog.Logger, ref domain.TaskRef) *slog.Logger {
	// Deferred: most tasks write no line, and the attributes (the task id's
	// string, their slice) were about 2% of a no-op task's CPU.
	id := control.ExecutorOf(ctx)
	return lazylog.WithFunc(base.Handler(), func() []slog.Attr {
		a := []slog.Attr{slog.String("job_id", ref.Job), slog.Int("stage", ref.Stage),
			slog.Int("partition", ref.Partition), slog.String("task", ref.String())}
		if id != "" {
			a = append(a, slog.String("executor_id", id))
		}
		return a
	})
}

// attemptLogger is log with the claimed attempt's fields, deferred as
// taskLogger's are.
func attemptLogger(log *slog.Logger, attempt int, stageName string) *slog.Logger {
	return lazylog.WithFunc(log.Handler(), func() []slog.Attr {
		return []slog.Attr{slog.Int("attempt", attempt), slog.String("stage_name", stageName)}
	})
}
