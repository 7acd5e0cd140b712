package batchwork

import "github.com/batchwork/batchwork/internal/executor"

// ErrNoInput is what reading the records of a task without an input
// returns (Records with a nil Input): the task's stage is partitioned by
// count and reads no input prefix and no shuffle. It is permanent
// (IsPermanent): the task fails once, without retries.
var ErrNoInput = executor.ErrNoInput
