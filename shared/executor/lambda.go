package executor

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
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

// Handle processes a batch concurrently.
func (h *LambdaHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var mu sync.Mutex
	var resp events.SQSEventResponse
	var wg sync.WaitGroup
	for _, rec := range ev.Records {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := h.QueueURLs[rec.EventSourceARN[strings.LastIndex(rec.EventSourceARN, ":")+1:]]
			extend := func(ctx context.Context, d time.Duration) error {
				return h.Queue.ChangeVisibility(ctx, url, rec.ReceiptHandle, d)
			}
			sent, _ := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
			res := h.Runner.Handle(ctx, Delivery{Body: rec.Body, SentAt: time.UnixMilli(sent)}, extend)
			if res.Action == Delete {
				return
			}
			if res.Action == Hide {
				_ = extend(ctx, res.Delay)
			}
			mu.Lock()
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			mu.Unlock()
		}()
	}
	wg.Wait()
	return resp, nil
}
