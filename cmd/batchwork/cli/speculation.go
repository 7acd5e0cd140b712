package cli

import (
	"fmt"

	"github.com/batchwork/batchwork/client"
)

// withCopy adds a task's speculative copy to its STATE cell in `batchwork
// tasks`: a copy running beside its holder, or which attempt the copy
// was.
func withCopy(t client.Task, state string) string {
	c := t.Copy
	switch {
	case c == nil:
		return state
	case c.Live:
		return fmt.Sprintf("%s, speculative copy attempt %d running beside attempt %d", state, c.Attempt, c.HolderAttempt)
	case c.Attempt == 0:
		return state + ", speculative copy requested"
	}
	return fmt.Sprintf("%s, speculative copy was attempt %d", state, c.Attempt)
}
