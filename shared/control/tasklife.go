package control

// The task lifecycle lives in tasks; these names keep their callers'
// spelling.

import (
	"context"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control/tasks"
)

type (
	// CommitResult is what an executor reports when it commits
	// (tasks.CommitResult).
	CommitResult = tasks.CommitResult
	// FailParams is how an attempt failed (tasks.FailParams).
	FailParams = tasks.FailParams
	// Decision is what the executor does with a failed task's message
	// (tasks.Decision).
	Decision = tasks.Decision
	// SplitRequest is a holder's offer to split (tasks.SplitRequest).
	SplitRequest = tasks.SplitRequest
	// SplitResult names the tasks a split added (tasks.SplitResult).
	SplitResult = tasks.SplitResult
	// MemoryReport is an executor's memory (tasks.MemoryReport).
	MemoryReport = tasks.MemoryReport
	// ECSTaskStateChange is ECS's task state change event
	// (tasks.ECSTaskStateChange).
	ECSTaskStateChange = tasks.ECSTaskStateChange
	// RemoteClaimRequest asks for a remote executor's claim
	// (tasks.RemoteClaimRequest).
	RemoteClaimRequest = tasks.RemoteClaimRequest
	// RemoteClaim is a claim as a remote executor holds it
	// (tasks.RemoteClaim).
	RemoteClaim = tasks.RemoteClaim
	// RemoteCommitRequest is a remote executor's commit; CommitArgs is
	// what it commits (tasks.RemoteCommitRequest).
	RemoteCommitRequest = tasks.RemoteCommitRequest
)

var (
	// ErrOutputsMissing means a commit named outputs that are not in S3.
	ErrOutputsMissing = tasks.ErrOutputsMissing
	// ErrSplitRefused refuses a split (tasks.ErrSplitRefused).
	ErrSplitRefused = tasks.ErrSplitRefused
	// ErrNoCheckpoints: a control plane cannot record checkpoints
	// (tasks.ErrNoCheckpoints).
	ErrNoCheckpoints = tasks.ErrNoCheckpoints
)

// Attempt ends of speculation (tasks.AttemptSpeculationLost,
// tasks.AttemptFailedBesideCopy).
const (
	AttemptSpeculationLost  = tasks.AttemptSpeculationLost
	AttemptFailedBesideCopy = tasks.AttemptFailedBesideCopy
)

// IsCopyMessage splits a task message's body into its task and whether
// it asks for a speculative copy (tasks.IsCopyMessage).
func IsCopyMessage(body string) (string, bool) { return tasks.IsCopyMessage(body) }

// ExecutorIDForECSTask is the executor id of an ECS task's arn
// (tasks.ExecutorIDForECSTask).
func ExecutorIDForECSTask(arn string) string { return tasks.ExecutorIDForECSTask(arn) }

// ParseECSTaskStateChange reads an ECS task state change event
// (tasks.ParseECSTaskStateChange).
func ParseECSTaskStateChange(raw []byte) (ECSTaskStateChange, bool) {
	return tasks.ParseECSTaskStateChange(raw)
}

// Claim claims a task (tasks.Lifecycle.Claim).
func (s *Service) Claim(ctx context.Context, ref batch.TaskRef) (Claim, error) {
	return s.tasks.Claim(ctx, ref)
}

// ClaimCopy claims a task's speculative copy (tasks.Copies.ClaimCopy).
func (s *Service) ClaimCopy(ctx context.Context, ref batch.TaskRef) (Claim, error) {
	return s.tasks.Copies().ClaimCopy(ctx, ref)
}

// RemoteClaim claims a task for a remote executor
// (tasks.Lifecycle.RemoteClaim).
func (s *Service) RemoteClaim(ctx context.Context, req RemoteClaimRequest) (RemoteClaim, error) {
	return s.tasks.RemoteClaim(ctx, req)
}

// Heartbeat extends the holder's lease (tasks.Lifecycle.Heartbeat).
func (s *Service) Heartbeat(ctx context.Context, c Claim) error { return s.tasks.Heartbeat(ctx, c) }

// Commit commits the holder's attempt (tasks.Lifecycle.Commit).
func (s *Service) Commit(ctx context.Context, c Claim, r CommitResult) error {
	return s.tasks.Commit(ctx, c, r)
}

// FlushCounts writes the counts waiting for their batch
// (tasks.Lifecycle.FlushCounts).
func (s *Service) FlushCounts(ctx context.Context) error { return s.tasks.FlushCounts(ctx) }

// Fail records the holder's failed attempt (tasks.Lifecycle.Fail).
func (s *Service) Fail(ctx context.Context, c Claim, p FailParams) (Decision, error) {
	return s.tasks.Fail(ctx, c, p)
}

// CanCheckpoint says whether checkpoints can be recorded
// (tasks.Lifecycle.CanCheckpoint).
func (s *Service) CanCheckpoint() error { return s.tasks.CanCheckpoint() }

// Checkpoint points c's task at a checkpoint of its attempt
// (tasks.Lifecycle.Checkpoint).
func (s *Service) Checkpoint(ctx context.Context, c Claim, seq int, offset int64) error {
	return s.tasks.Checkpoint(ctx, c, seq, offset)
}

// CheckpointRefused tags a refused checkpoint's objects for expiry
// (tasks.Lifecycle.CheckpointRefused).
func (s *Service) CheckpointRefused(ctx context.Context, c Claim, seq int) {
	s.tasks.CheckpointRefused(ctx, c, seq)
}

// Continue hands a checkpointed task on to a new invocation
// (tasks.Lifecycle.Continue).
func (s *Service) Continue(ctx context.Context, c Claim, offset int64) (Decision, error) {
	return s.tasks.Continue(ctx, c, offset)
}

// NoteResumed notes that c's attempt resumed from a checkpoint
// (tasks.Lifecycle.NoteResumed).
func (s *Service) NoteResumed(ctx context.Context, c Claim) { s.tasks.NoteResumed(ctx, c) }

// SplitTask records a holder's split (tasks.Lifecycle.SplitTask).
func (s *Service) SplitTask(ctx context.Context, c Claim, req SplitRequest) (SplitResult, error) {
	return s.tasks.SplitTask(ctx, c, req)
}

// StageDurations is the histogram of a stage's committed attempts
// (tasks.Copies.StageDurations).
func (s *Service) StageDurations(ctx context.Context, job string, stage int) (batch.Durations, error) {
	return s.tasks.Copies().StageDurations(ctx, job, stage)
}

// ExecutorAliveMemory renews an executor's liveness with its memory
// (tasks.Kills.ExecutorAliveMemory).
func (s *Service) ExecutorAliveMemory(ctx context.Context, id string, m MemoryReport) error {
	return s.tasks.Kills().ExecutorAliveMemory(ctx, id, m)
}

// MarkExecutorKilled records an executor killed for memory
// (tasks.Kills.MarkExecutorKilled).
func (s *Service) MarkExecutorKilled(ctx context.Context, id, reason string) error {
	return s.tasks.Kills().MarkExecutorKilled(ctx, id, reason)
}

// ECSTaskStopped marks a Fargate executor ECS stopped for memory
// (tasks.Kills.ECSTaskStopped).
func (s *Service) ECSTaskStopped(ctx context.Context, ev ECSTaskStateChange) (bool, error) {
	return s.tasks.Kills().ECSTaskStopped(ctx, ev)
}
