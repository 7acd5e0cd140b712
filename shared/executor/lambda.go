package executor

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/queue"
)

// LambdaHandler is the Lambda host: an SQS event source handler that
// reports partial batch failures. A message to keep (a retry's backoff, a
// live claim elsewhere, a lost lease) is reported as a failure so Lambda
// does not delete it; its visibility was set to the delay first. The
// top-level error is always nil: per-message outcomes are in the response.
type LambdaHandler struct {
	Runner *Runner
	Queue  Queue
	// QueueURLs maps queue names to URLs (from the environment), since SQS
	// events carry the queue's ARN.
	QueueURLs map[string]string
}

// Handle processes a batch concurrently. An invocation is an executor of
// its own (see Liveness): it renews a liveness record and keeps its
// messages hidden seconds at a time while it runs, so a crashed
// invocation's tasks are taken over in seconds.
func (h *LambdaHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var mu sync.Mutex
	var resp events.SQSEventResponse
	var wg sync.WaitGroup
	var held *heldMessages
	if live, ok := h.Runner.CP.(Liveness); ok {
		id := control.NewExecutorID()
		// Without a first record this invocation's claims carry no id:
		// they are then recovered by their lease, as before liveness.
		if err := live.ExecutorAlive(ctx, id); err != nil {
			h.Runner.Log.Warn("executor liveness: running without", "err", err)
		} else {
			ctx = control.WithExecutor(ctx, id)
			held = newHeldMessages(h.Queue, h.Runner.Log)
			stop := held.start(ctx, live, id)
			defer stop()
		}
	}
	for _, rec := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := h.QueueURLs[rec.EventSourceARN[strings.LastIndex(rec.EventSourceARN, ":")+1:]]
			extend := func(ctx context.Context, d time.Duration) error {
				return h.Queue.ChangeVisibility(ctx, url, rec.ReceiptHandle, d)
			}
			sent, _ := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
			d := Delivery{Body: rec.Body, SentAt: time.UnixMilli(sent)}
			var res Result
			hide := func() {
				switch {
				case res.Action == Hide:
					_ = extend(ctx, res.Delay)
				case res.Action == Delete && held != nil:
					// The event source deletes it when the whole batch
					// returns; until then it must not come back from the
					// short visibility the beat kept it at.
					_ = extend(ctx, untilBatchEnds(ctx))
				}
			}
			if held != nil {
				m := queue.Message{Queue: url, Receipt: rec.ReceiptHandle}
				held.add(m)
				// The batch arrived with the queue's long visibility: the
				// beat shortens it to the held visibility from now on.
				res = h.Runner.Handle(ctx, d, nil)
				held.remove(m, hide)
			} else {
				res = h.Runner.Handle(ctx, d, extend)
				hide()
			}
			if res.Action == Delete {
				return
			}
			mu.Lock()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return resp, nil
}

// untilBatchEnds is how long a finished message stays hidden in a Lambda
// batch: past the invocation's deadline, by when the event source has
// deleted it.
func untilBatchEnds(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return time.Until(dl) + 30*time.Second
	}
	return 15 * time.Minute // Lambda's longest invocation
}
