package feed

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/tuning"
)

// LambdaHandler is the Lambda host: an SQS event source handler that
// reports partial batch failures. A message to keep (a retry's backoff, a
// live claim elsewhere, a lost lease) is reported as a failure so Lambda
// does not delete it; its visibility was set to the delay first. The
// top-level error is always nil: per-message outcomes are in the response.
//
// An invocation runs the tasks of one owner only (see Handle), so what
// one owner's task does to the process (a panic on a goroutine of its
// own, running out of memory, the invocation's timeout) can cost other
// owners nothing.
type LambdaHandler struct {
	// Handler runs each task of the batch (executor.Runner).
	Handler Handler
	// CP keeps the invocation's liveness record, writes batched counts
	// and says the owners of the batch's jobs.
	CP    ControlPlane
	Queue Queue
	Log   *slog.Logger
	// QueueURLs maps queue names to URLs (from the environment), since SQS
	// events carry the queue's ARN.
	QueueURLs map[string]string
	// ContinueMargin is how long before the invocation's deadline a task
	// that checkpoints is asked to checkpoint and continue in a new
	// invocation (executor's checkpoint.go); 0: DefaultContinueMargin.
	ContinueMargin time.Duration
}

// Handle runs one owner's messages of the batch concurrently, and hands
// every other owner's back first: made visible again at once and reported
// as batch item failures, never claimed, so they spend no attempt and do
// not wait for the queue's visibility timeout (see splitByOwner). An
// invocation is an executor of its own (see Liveness): it renews a
// liveness record and keeps its messages hidden seconds at a time while it
// runs, so a crashed invocation's tasks are taken over in seconds.
func (h *LambdaHandler) Handle(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var mu sync.Mutex
	var resp events.SQSEventResponse
	// Tasks longer than an invocation continue in the next (executor's checkpoint.go).
	ctx = WithContinueMargin(ctx, cmp.Or(h.ContinueMargin, DefaultContinueMargin))
	run, back, later := h.splitByOwner(ctx, ev.Records)
	// Before anything runs, so that a crash cannot keep them: a message
	// this invocation neither handed back nor holds stays hidden for the
	// queue's visibility timeout.
	h.handBack(ctx, back, 0)
	h.handBack(ctx, later, tuning.HeldVisibility)
	for _, rec := range slices.Concat(back, later) {
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
	}
	var wg sync.WaitGroup
	var held *heldMessages
	// Without a first record this invocation's claims carry no id: they
	// are then recovered by their lease, as on a control plane without
	// liveness records (ErrUnsupported).
	id := control.NewExecutorID()
	switch err := h.CP.ExecutorAlive(ctx, id); {
	case errors.Is(err, ErrUnsupported):
	case err != nil:
		h.Log.Warn("executor liveness: running without", "err", err)
	default:
		ctx = control.WithExecutor(ctx, id)
		held = newHeldMessages(h.Queue, h.Log)
		stop := held.start(ctx, h.CP, id)
		defer stop()
	}
	for _, rec := range run {
		wg.Add(1)
		go func() {
			defer wg.Done()
			url := h.queueURL(rec)
			extend := func(ctx context.Context, d time.Duration) error {
				return h.Queue.ChangeVisibility(ctx, url, rec.ReceiptHandle, d)
			}
			sent, _ := strconv.ParseInt(rec.Attributes["SentTimestamp"], 10, 64)
			d := Delivery{Body: rec.Body, SentAt: time.UnixMilli(sent), Trace: traceOf(rec)}
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
				res = h.Handler.Handle(ctx, d, nil)
				held.remove(hide, m)
			} else {
				res = h.Handler.Handle(ctx, d, extend)
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
	// The event source deletes the batch's messages when this returns:
	// their tasks' batched counts go first (countflush.go), and when they
	// could not be written, every message of the batch stays.
	if !countFlush(h.CP, h.Log)() {
		resp.BatchItemFailures = resp.BatchItemFailures[:0]
		for _, rec := range ev.Records {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
		}
	}
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

func (h *LambdaHandler) queueURL(rec events.SQSMessage) string {
	return h.QueueURLs[rec.EventSourceARN[strings.LastIndex(rec.EventSourceARN, ":")+1:]]
}

// splitByOwner divides a batch into the records to run here, all of one
// owner, and the records to hand back: back, of other owners, and later,
// whose owner cannot be read now (they must not run beside another's, and
// handing them back at once would spin while the table is unreachable).
//
// The owner comes from the job record (Owners), never from the message.
// Records that run no user code go with the owner that runs: a body that
// names no task, and a task of a job that no longer exists, whose claim
// drops the message. The owner that runs is that of the record SQS
// delivered most often (the first such record on a tie), so a message
// handed back before goes first in its next batch instead of bouncing
// until it is dead-lettered. The owner of a job comes from its record
// (JobOwner), since a task message's body names only the task. A control
// plane that cannot say owners (ErrUnsupported) makes each job an owner of
// its own: never less isolation, only smaller batches.
func (h *LambdaHandler) splitByOwner(ctx context.Context, recs []events.SQSMessage) (run, back, later []events.SQSMessage) {
	if len(recs) < 2 {
		return recs, nil, nil
	}
	const noCode = ""           // the key of a record that runs no user code
	jobs := map[string]string{} // job -> owner key
	var unknown map[string]bool // jobs whose owner cannot be read now
	var refs []string
	for _, rec := range recs {
		if ref, err := domain.ParseTaskRef(rec.Body); err == nil {
			if _, seen := jobs[ref.Job]; !seen {
				jobs[ref.Job] = "job " + ref.Job
				refs = append(refs, ref.Job)
			}
		}
	}
	{
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, job := range refs {
			wg.Go(func() {
				owner, err := h.CP.JobOwner(ctx, job)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, ErrUnsupported):
					// The job stays an owner of its own.
				case errors.Is(err, domain.ErrNotFound):
					jobs[job] = noCode
				case err != nil:
					h.Log.Warn("owner of a batch's job: handing its messages back", "job_id", job, "err", err)
					if unknown == nil {
						unknown = map[string]bool{}
					}
					unknown[job] = true
				default:
					jobs[job] = "owner " + owner
				}
			})
		}
		wg.Wait()
	}
	keyOf := func(rec events.SQSMessage) (key string, ok bool) {
		ref, err := domain.ParseTaskRef(rec.Body)
		if err != nil {
			return noCode, true
		}
		return jobs[ref.Job], !unknown[ref.Job]
	}
	chosen, most := noCode, -1
	for _, rec := range recs {
		key, ok := keyOf(rec)
		if n, _ := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"]); ok && key != noCode && n > most {
			chosen, most = key, n
		}
	}
	for _, rec := range recs {
		switch key, ok := keyOf(rec); {
		case !ok:
			later = append(later, rec)
		case key == noCode || key == chosen:
			run = append(run, rec)
		default:
			back = append(back, rec)
		}
	}
	if len(back) > 0 || len(later) > 0 {
		h.Log.Info("batch of several owners: running one owner's tasks, handing the rest back",
			"run", len(run), "handed_back", len(back), "owner_unknown", len(later))
	}
	return run, back, later
}

// handBack makes recs visible again after d. A change that fails leaves a
// message hidden for the queue's visibility timeout; its task is still
// READY, so the sweep sends it a fresh message once it has waited
// unclaimed for its StuckAfter.
func (h *LambdaHandler) handBack(ctx context.Context, recs []events.SQSMessage, d time.Duration) {
	byURL := map[string][]string{}
	for _, rec := range recs {
		url := h.queueURL(rec)
		byURL[url] = append(byURL[url], rec.ReceiptHandle)
	}
	for url, receipts := range byURL {
		if _, err := h.Queue.ChangeVisibilityBatch(ctx, url, receipts, d); err != nil {
			h.Log.Warn("hand messages back", "queue", url, "messages", len(receipts), "err", err)
		}
	}
}

// traceOf is the traceparent a task's message carried, "" if none.
func traceOf(rec events.SQSMessage) string {
	if v := rec.MessageAttributes[queue.TraceAttribute].StringValue; v != nil {
		return *v
	}
	return ""
}
