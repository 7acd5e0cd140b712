package executor

import (
	"context"
	"log/slog"
)

// CountFlusher is a control plane that batches commit counts
// (control.Service with Config.CountLinger): a committed task's count may
// wait for its batch after Commit returns.
type CountFlusher interface {
	FlushCounts(context.Context) error
}

// countFlush returns what writes cp's pending counts before finished
// messages are deleted, and says whether it wrote them all. A message
// deleted before its task's count is written would leave a crash between
// the two to the sweep's next look at the task's chunk (minutes); kept
// until then, the message comes back, and the claim it makes, refused,
// counts the task. So when the counts could not be written, the caller
// keeps the messages.
func countFlush(cp ControlPlane, log *slog.Logger) func() bool {
	f, ok := cp.(CountFlusher)
	if !ok {
		return func() bool { return true }
	}
	return func() bool {
		if err := f.FlushCounts(context.Background()); err != nil {
			log.Warn("batched counts before deleting messages: keeping the messages", "err", err)
			return false
		}
		return true
	}
}
