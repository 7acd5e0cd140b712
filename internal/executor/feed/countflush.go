package feed

import (
	"context"
	"errors"
	"log/slog"
)

// countFlush returns what writes cp's pending counts before finished
// messages are deleted, and says whether it wrote them all. A message
// deleted before its task's count is written would leave a crash between
// the two to the sweep's next look at the task's chunk (minutes); kept
// until then, the message comes back, and the claim it makes, refused,
// counts the task. So when the counts could not be written, the caller
// keeps the messages. Counts are batched by control.Service with
// Config.CountLinger: a committed task's count may wait for its batch
// after the commit returns. A control plane that batches none
// (ErrUnsupported) has nothing to write.
func countFlush(cp ControlPlane, log *slog.Logger) func() bool {
	return func() bool {
		err := cp.FlushCounts(context.Background())
		if errors.Is(err, ErrUnsupported) {
			return true
		}
		if err != nil {
			log.Warn("batched counts before deleting messages: keeping the messages", "err", err)
			return false
		}
		return true
	}
}
