package kernel

import (
	"context"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/spec"
)

// Events (shared/events). Every transition that Batchwork reports writes
// its event to the outbox in its own transaction (shared/dynamo,
// outbox.go): a job's submission and its end, a stage's completion, a
// task's failure after its last attempt. Right after the transaction the
// process that made it publishes the event (PublishEvents), best effort:
// an error is logged and never fails the transition, which has happened.
// The sweep publishes what is left (SweepEvents), so an event is never
// lost, and may be delivered twice (its detail's eventId is stable).

// EventPublisher puts pending outbox events on the bus and deletes their
// records (events.Publisher).
type EventPublisher interface {
	// Publish delivers to the bus and every sink within ctx (the sweep).
	Publish(ctx context.Context, ids ...string) (int, error)
	// PublishPrompt is Publish on the request that made the change: the
	// sinks (a lineage endpoint) get events.PromptSinkBudget in all, and
	// what they did not accept waits for the sweep.
	PublishPrompt(ctx context.Context, ids ...string) (int, error)
}

var _ EventPublisher = (*events.Publisher)(nil)

// eventPublishTimeout bounds the publish after a transition, so a slow
// bus never holds a commit or a submit for long: the sweep catches up.
// The sinks get much less (events.PromptSinkBudget).
const eventPublishTimeout = 3 * time.Second

// PublishEvents publishes the events a transition of this process has
// just written, best effort.
func (s *Kernel) PublishEvents(ctx context.Context, ids ...string) {
	if s.Events == nil || len(ids) == 0 || ctx.Err() != nil {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, eventPublishTimeout)
	defer cancel()
	if _, err := s.Events.PublishPrompt(pctx, ids...); err != nil {
		s.log.Warn("publish events: left for the sweep", "events", ids, "err", err)
	}
}

// noEventsRecheck is when the sweep of a process without a publisher looks
// at a pending event again, so that events do not crowd its index shards.
const noEventsRecheck = time.Hour

// SweepEvents publishes the outbox records the sweep found due, in
// batches of events.MaxBatch. An event that fails stays due, for the next
// run.
func (s *Kernel) SweepEvents(ctx context.Context, ids []string, now time.Time, c *SweepCounts) error {
	if s.Events == nil {
		for _, id := range ids {
			if err := s.store.DueSet(ctx, dynamo.DueItem{Kind: dynamo.DueEvent, Event: id}, now.Add(noEventsRecheck)); err != nil {
				return err
			}
		}
		return nil
	}
	var first error
	for lo := 0; lo < len(ids); lo += events.MaxBatch {
		batch := ids[lo:min(lo+events.MaxBatch, len(ids))]
		n, err := s.Events.Publish(ctx, batch...)
		c.Events += n
		if err == nil {
			continue
		}
		if first == nil {
			first = err
		}
		// Refused events would keep their place, due since their change,
		// at the head of their index shards, which the sweep reads a
		// bounded number of records of, oldest first: an outage of the bus
		// would hide every task behind them. They wait their turn again.
		// (The batch's published events are gone: SetDue skips them.)
		for _, id := range batch {
			if err := s.store.DueSet(ctx, dynamo.DueItem{Kind: dynamo.DueEvent, Event: id}, now.Add(eventRetryAfter)); err != nil && first == nil {
				first = err
			}
		}
	}
	return first
}

// eventRetryAfter is when the sweep tries again an event the bus refused.
const eventRetryAfter = time.Minute

// StageCompletedEvent is a stage's completion event.
func StageCompletedEvent(job, owner string, sp *spec.Job, idx int, p domain.Progress, now time.Time) *events.Event {
	ev := events.New(events.StageCompletedID(job, idx), events.StageCompleted, now, events.Detail{
		Owner: owner, JobID: job, JobName: sp.Name, Stage: sp.Stages[idx].Name, StageIndex: events.Int(idx),
		Counts: &events.Counts{Tasks: p.Total, TasksCommitted: p.Committed},
	})
	return &ev
}

// TaskFailedEvent is a task's failure after its last attempt (attempts,
// the attempt that failed it, is part of its id: events.TaskFailedID).
func TaskFailedEvent(ref domain.TaskRef, owner string, sp *spec.Job, attempts int, cause string, now time.Time) *events.Event {
	ev := events.New(events.TaskFailedID(ref.Job, ref.Stage, ref.Partition, attempts), events.TaskFailed, now, events.Detail{
		Owner: owner, JobID: ref.Job, JobName: sp.Name, Stage: sp.Stages[ref.Stage].Name, StageIndex: events.Int(ref.Stage),
		Partition: events.Int(ref.Partition), Attempts: attempts, Error: cause,
	})
	return &ev
}
