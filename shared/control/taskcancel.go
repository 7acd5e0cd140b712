package control

// A task's cancel by its job's owner (operations/taskcancel.go,
// Operator.CancelTask); these names keep the facade's spelling.

import "github.com/batchwork/batchwork/shared/control/operations"

type (
	// CancelTaskRequest asks to cancel one task ("STAGE/PARTITION").
	CancelTaskRequest = operations.CancelTaskRequest
	// TaskCancellation is the answer of a task's cancel.
	TaskCancellation = operations.TaskCancellation
	// TaskNotFoundError: the job has no such task (404).
	TaskNotFoundError = operations.TaskNotFoundError
	// TaskEndedError: the task finished before the cancel (409).
	TaskEndedError = operations.TaskEndedError
	// TaskNotStartedError: the task's stage has not made it yet (409).
	TaskNotStartedError = operations.TaskNotStartedError
)
