// Command sweep is the sweep Lambda: run every minute by EventBridge, and
// the consumer of the schedule timer queue (handed-off firings).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/tracing"
)

func main() {
	// Schedule firings are submits: checked against the executors' task names.
	lambda.Start(handler(lambdaenv.Must(context.Background(), lambdaenv.CheckTaskNames)))
}

// handler serves the invocations the function gets. An SQS event (its
// records say so) is a batch of timer messages: each is fired, and the
// ones that failed are reported as batch item failures so only they come
// back. An ECS task state change marks a Fargate executor stopped for
// memory (control.Service.ECSTaskStopped). Anything else is the
// schedule's event and runs one sweep, whose errors are returned so the
// Lambda error metric (and its alarm) sees them; the counts are logged
// either way.
func handler(w lambdaenv.Wired) func(context.Context, json.RawMessage) (any, error) {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		// Repairs, and the failures and commits the sweep decides, are
		// written before the process may be frozen.
		defer w.Metrics.Flush()
		defer tracing.Flush(ctx)
		var ev events.SQSEvent
		if json.Unmarshal(raw, &ev) == nil && len(ev.Records) > 0 && ev.Records[0].EventSource == "aws:sqs" {
			return fireTimers(ctx, w, ev), nil
		}
		if ecs, ok := control.ParseECSTaskStateChange(raw); ok {
			// A Fargate executor stopped for memory (infra/batchwork/oom.go).
			_, err := w.Service.ECSTaskStopped(ctx, ecs)
			return nil, err
		}
		return w.Service.Sweep(ctx)
	}
}

func fireTimers(ctx context.Context, w lambdaenv.Wired, ev events.SQSEvent) events.SQSEventResponse {
	bodies := make([]string, len(ev.Records))
	for i, r := range ev.Records {
		bodies[i] = r.Body
	}
	var resp events.SQSEventResponse
	for i, err := range w.Service.FireTimers(ctx, bodies) {
		switch {
		case err == nil:
		case errors.Is(err, control.ErrNotTimer):
			// Retrying cannot help; dropping it loses nothing, as the
			// sweep fires every schedule anyway.
			w.Log.Error("timer queue message is not a timer", "message_id", ev.Records[i].MessageId, "err", err)
		default:
			w.Log.Warn("timer", "message_id", ev.Records[i].MessageId, "err", fmt.Sprint(err))
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp
}
