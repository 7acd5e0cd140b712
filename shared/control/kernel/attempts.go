package kernel

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
)

// AttemptEnd is the end record of an attempt; holder, when it is that
// attempt's claim record, tells who ran it and since when.
func AttemptEnd(ref domain.TaskRef, attempt int, kind domain.AttemptEndKind, at time.Time, msg string, holder domain.Task) domain.AttemptEnd {
	e := domain.AttemptEnd{Ref: ref, Attempt: attempt, Kind: kind, At: at, Err: msg}
	if holder.Attempt == attempt {
		e.Executor, e.Started = holder.Executor, holder.Claimed
	}
	return e
}

// Logs says whether k's logger writes lines of level l: a caller skips
// building a task's logger for a line that would be dropped.
func Logs(ctx context.Context, k *Kernel, l slog.Level) bool { return k.log.Enabled(ctx, l) }

// TaskLog is the logger of a task's control-plane lines: the task's ids
// plus the attempt and, when ctx carries one, the acting executor's id,
// so that a task's lines can be found by any of them.
func (s *Kernel) TaskLog(ctx context.Context, ref domain.TaskRef, attempt int) *slog.Logger {
	return slog.New(s.log.Handler().WithAttrs(attemptAttrs(ctx, taskAttrs(make([]slog.Attr, 0, 6), ref), ref, attempt)))
}

// taskAttrs appends a task's fields in its control-plane lines
// (Logger's) to a: one list, so TaskLog's logger and TaskInfo's record
// write the same bytes.
func taskAttrs(a []slog.Attr, ref domain.TaskRef) []slog.Attr {
	return append(a, slog.String("job_id", ref.Job), slog.Int("stage", ref.Stage), slog.String("task", ref.String()))
}

// attemptAttrs appends the fields TaskLog adds to Logger's to a: the
// partition, the attempt and, when ctx carries one, the acting
// executor's id.
func attemptAttrs(ctx context.Context, a []slog.Attr, ref domain.TaskRef, attempt int) []slog.Attr {
	a = append(a, slog.Int("partition", ref.Partition), slog.Int("attempt", attempt))
	if id := ExecutorOf(ctx); id != "" {
		a = append(a, slog.String("executor_id", id))
	}
	return a
}

// TaskInfo writes one info line of a task's control plane with the fields
// TaskLog's logger gives it (taskAttrs, so the same bytes), as one
// record: the three Withs and the handler state each copies cost the
// commit path about 3% of a no-op task's CPU ("task committed" is written
// for every task). The record carries no caller (pc 0): no handler here
// adds the source.
func TaskInfo(ctx context.Context, k *Kernel, ref domain.TaskRef, attempt int, msg string, args ...any) {
	h := k.log.Handler()
	if !h.Enabled(ctx, slog.LevelInfo) {
		return
	}
	r := slog.NewRecord(time.Now(), slog.LevelInfo, msg, 0)
	var buf [6]slog.Attr // the fields on the stack: the record copies them
	r.AddAttrs(attemptAttrs(ctx, taskAttrs(buf[:0], ref), ref, attempt)...)
	r.Add(args...)
	_ = h.Handle(ctx, r)
}
