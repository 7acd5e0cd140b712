package control

// The task lifecycle lives in tasks; these names keep their callers'
// spelling.

import (
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
