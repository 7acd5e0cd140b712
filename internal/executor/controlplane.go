package executor

import (
	"context"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
)

// ControlPlane is everything the runner and its hosts call on the control
// plane, grouped by capability. Every implementation has every method: one
// that lacks a capability says so by returning an error wrapping
// ErrUnsupported, and the runner then runs with that feature off, as each
// capability's comment describes. No feature is found by a type assertion,
// so a wrapper cannot switch one off by accident.
type ControlPlane interface {
	Claimer
	Committer
	Failer
	Checkpointer
	Splitter
	Sizer
	Jobs
	feed.ControlPlane // the hosts': liveness, batched counts, owners
}

// ErrUnsupported is returned, wrapped with what is unsupported, by a
// control plane (ControlPlane) or a blob store (Blob) that lacks a
// capability; the runner runs without it. One value with the hosts'
// (feed.ErrUnsupported), which check it too.
var ErrUnsupported = feed.ErrUnsupported

var _ ControlPlane = (*control.Service)(nil)

// Claimer takes and keeps a task's claim. ClaimCopy may be unsupported:
// copy messages are then dropped and the task's own claim runs on.
type Claimer interface {
	Claim(ctx context.Context, ref domain.TaskRef) (control.Claim, error)
	ClaimCopy(ctx context.Context, ref domain.TaskRef) (control.Claim, error)
	Heartbeat(ctx context.Context, c control.Claim) error
}

// Committer commits an attempt whose outputs the runner published itself:
// its own If-None-Match puts, or their 412s, prove the objects exist, so
// its result says WrittenHere and the commit skips listing them (a remote
// executor commits through the commit function, which lists).
type Committer interface {
	Commit(ctx context.Context, c control.Claim, r control.CommitResult) error
}

// Failer records a failed attempt with its error's class.
type Failer interface {
	Fail(ctx context.Context, c control.Claim, p control.FailParams) (control.Decision, error)
}

// Checkpointer records checkpoints and continuations (checkpoint.go).
type Checkpointer interface {
	// CanCheckpoint is nil when checkpoints can be recorded; an error
	// (ErrUnsupported, control.ErrNoCheckpoints) turns them off: attempts
	// get no checkpointer, Task.Checkpoint fails with domain.ErrCheckpoint
	// and Task.Resume starts afresh. Checkpoint and Continue returning
	// ErrUnsupported are taken the same way.
	CanCheckpoint() error
	Checkpoint(ctx context.Context, c control.Claim, seq int, offset int64) error
	Continue(ctx context.Context, c control.Claim, offset int64) (control.Decision, error)
	// NoteResumed and CheckpointRefused are best effort: they report
	// nothing, and one without checkpoints does nothing.
	NoteResumed(ctx context.Context, c control.Claim)
	CheckpointRefused(ctx context.Context, c control.Claim, seq int)
}

// Splitter gives the unread rest of a straggling input task to new tasks
// (dynsplit.go). SplitTask may be unsupported: the offer counts as
// refused and the attempt reads on.
type Splitter interface {
	SplitTask(ctx context.Context, c control.Claim, req control.SplitRequest) (control.SplitResult, error)
}

// Sizer serves executors of a known size (memory.go, sizedqueues.go).
// Either may be unsupported: the task's stage memory then decides, and a
// message on the wrong size's queue is handed back instead of forwarded.
type Sizer interface {
	TaskMemory(ctx context.Context, ref domain.TaskRef) (spec.Size, error)
	Forward(ctx context.Context, body string, delay time.Duration) error
}

// Jobs reads a job's record without a claim. JobSpec may be unsupported:
// the claim then decides whether this host can run a task. CheckJob
// is called every JobStateTTL while a task runs; a TTL of 0 means the
// control plane cannot check jobs cheaply, and tasks of a job that ended
// stop at their next heartbeat instead (jobwatch.go).
type Jobs interface {
	JobSpec(ctx context.Context, job string) (*spec.Job, error)
	CheckJob(ctx context.Context, c control.Claim) error
	JobStateTTL() time.Duration
}
