package cli

import (
	"fmt"

	"github.com/batchwork/batchwork/client"
)

// withCheckpoint adds a task's last checkpoint to its STATE cell in
// `batchwork tasks`: where in its input it reached, and how often it
// continued in a new invocation.
func withCheckpoint(t client.Task, state string) string {
	ck := t.Checkpoint
	if ck == nil {
		return state
	}
	s := fmt.Sprintf("%s, checkpoint at byte %d (attempt %d)", state, ck.Offset, ck.Attempt)
	if ck.Continuations > 0 {
		s += fmt.Sprintf(", continued %d×", ck.Continuations)
	}
	return s
}
