package executor

import (
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
)

// ErrNoInput is the error of a task function that reads the records of a
// task without an input: its stage is partitioned by count and reads no
// input prefix and no shuffle, so Task.Input is nil. It is permanent: no
// retry can give the task an input, and a panic on the nil reader would be
// retried as an ordinary failure.
var ErrNoInput = fmt.Errorf("this task's stage has no input (partitioned by count, with no input prefix and no shuffle), so it has no records to read: %w",
	domain.ErrPermanent)
