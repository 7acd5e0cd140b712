package cli

import (
	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/shared/domain"
)

// taskState is the STATE cell of `batchwork tasks`: a FAILED task's state
// says what ended it (its error class), "FAILED (permanent error)", and a
// task an out-of-memory retry moved to a larger executor says which size.
func taskState(t client.Task) string {
	s := t.State
	if t.State == "FAILED" && t.ErrorClass != "" {
		s += " (" + domain.ErrorClass(t.ErrorClass).Ended() + ")"
	}
	if t.Memory != "" && t.State != "FAILED" {
		s += " @" + t.Memory
	}
	return s
}
