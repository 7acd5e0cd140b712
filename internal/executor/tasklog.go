package executor

import (
	"context"
	"log/slog"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// taskLogger is the logger of one task message's lines, the task
// function's own included (Task.Log): the job, stage and task ids, and the
// id of the executor (a long-polling slot pool, a Lambda invocation) that
// handles it, as recorded on the attempt. The attempt is added once the
// claim grants it. `batchwork logs` finds a job's and a task's lines by
// these fields (shared/logs).
func taskLogger(ctx context.Context, base *slog.Logger, ref domain.TaskRef) *slog.Logger {
	l := base.With("job_id", ref.Job, "stage", ref.Stage, "partition", ref.Partition, "task", ref.String())
	if id := control.ExecutorOf(ctx); id != "" {
		l = l.With("executor_id", id)
	}
	return l
}
