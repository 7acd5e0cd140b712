package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// Bus is the slice of the EventBridge client the publisher uses.
type Bus interface {
	PutEvents(context.Context, *eventbridge.PutEventsInput, ...func(*eventbridge.Options)) (*eventbridge.PutEventsOutput, error)
}

// Outbox is where pending events wait (shared/dynamo's outbox records).
type Outbox interface {
	// OutboxEvent reads a pending event; found is false once it was
	// published (its record deleted).
	OutboxEvent(ctx context.Context, id string) (ev Event, found bool, err error)
	// DeleteOutboxEvent deletes a published event's record.
	OutboxDelete(ctx context.Context, id string) error
	// OutboxDelivered notes that the destination named to accepted the
	// event (Event.Delivered), so that a later publication of it skips
	// that destination; a record already deleted stays deleted.
	OutboxDelivered(ctx context.Context, id, to string) error
}

// Sink is a destination of the outbox's events besides the bus, such as
// an OpenLineage endpoint (shared/lineage). An event's record is deleted
// only once the bus and every sink accepted it; one that accepted it is
// noted on the record (Outbox.OutboxDelivered) and not asked again.
type Sink interface {
	// Name is the sink's name in Event.Delivered; stable across
	// processes and releases.
	Name() string
	// Deliver delivers ev, or decides it is not for this sink; both
	// answer nil. An error leaves ev's record for a later publication:
	// a sink that refuses an event for good (one it can never deliver)
	// says so in its logs and answers nil, or the record would stay.
	Deliver(ctx context.Context, ev Event) error
}

// BusDestination is the bus's name in Event.Delivered.
const BusDestination = "bus"

// MaxBatch is how many entries one PutEvents takes.
const MaxBatch = 10

// Publisher puts pending events on one bus and hands them to its sinks,
// then deletes their records.
type Publisher struct {
	bus    Bus
	name   string
	outbox Outbox
	sinks  []Sink
}

// NewPublisher returns a publisher to the bus named busName and to sinks.
// bus is nil when the installation has no bus (events go to the sinks
// alone).
func NewPublisher(bus Bus, busName string, outbox Outbox, sinks ...Sink) *Publisher {
	return &Publisher{bus: bus, name: busName, outbox: outbox, sinks: sinks}
}

// BusName is the bus the publisher puts events on.
func (p *Publisher) BusName() string { return p.name }

// ErrEntryFailed means EventBridge refused some entries of a PutEvents
// (FailedEntryCount); their records stay for the sweep to publish again.
var ErrEntryFailed = errors.New("eventbridge refused an entry")

// Publish puts the pending events named by ids on the bus, MaxBatch per
// PutEvents, hands each to the sinks, and deletes the record of each event
// that every destination accepted; a destination that accepted an event
// whose record stays is noted on it. An id without a record was published
// already and is skipped. Events refused (a partial failure) or not sent
// keep their records, and the error says which. It returns how many
// events were put on the bus (delivered to the sinks, without a bus).
//
// A sink that fails is not asked again in this call: its events wait for
// the sweep, so a sink that is down costs one failed delivery a call,
// never one per event.
func (p *Publisher) Publish(ctx context.Context, ids ...string) (int, error) {
	return p.publish(ctx, 0, ids)
}

// PromptSinkBudget bounds, in total, what PublishPrompt gives the sinks,
// building their messages included: a request that made a change waits
// no longer than this for a lineage endpoint, however slow or hung.
const PromptSinkBudget = 500 * time.Millisecond

// PublishPrompt is Publish right after the change, on the request that
// made it: the sinks together get PromptSinkBudget (within ctx), and an
// event a sink did not accept in time keeps its record (noted as
// accepted by the bus) for the sweep, which delivers it with Publish.
func (p *Publisher) PublishPrompt(ctx context.Context, ids ...string) (int, error) {
	return p.publish(ctx, PromptSinkBudget, ids)
}

// publish is Publish, the sinks bounded by sinkBudget when it is not 0.
// The outbox's reads and writes and the bus keep ctx: a sink's budget
// running out must not stop the record from being noted.
func (p *Publisher) publish(ctx context.Context, sinkBudget time.Duration, ids []string) (int, error) {
	var pending []Event
	var errs []error
	for _, id := range ids {
		ev, found, err := p.outbox.OutboxEvent(ctx, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if found {
			pending = append(pending, ev)
		}
	}
	done := make([]map[string]bool, len(pending)) // destinations that accepted each, in this call
	for i := range done {
		done[i] = map[string]bool{}
	}
	put := 0
	if p.bus != nil {
		var errBus error
		put, errBus = p.putOnBus(ctx, pending, done)
		errs = append(errs, errBus)
	}
	sctx := ctx
	if sinkBudget > 0 && len(p.sinks) > 0 && len(pending) > 0 {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(ctx, sinkBudget)
		defer cancel()
	}
	failed := map[string]bool{}
	for i, ev := range pending {
		for _, sink := range p.sinks {
			name := sink.Name()
			if slices.Contains(ev.Delivered, name) {
				continue
			}
			if failed[name] {
				errs = append(errs, fmt.Errorf("event %s: %s: skipped after an earlier failure", ev.ID, name))
				continue
			}
			if err := sink.Deliver(sctx, ev); err != nil {
				failed[name] = true
				errs = append(errs, fmt.Errorf("event %s: %s: %w", ev.ID, name, err))
				continue
			}
			done[i][name] = true
		}
	}
	for i, ev := range pending {
		complete := true
		for _, to := range p.destinations() {
			if !done[i][to] && !slices.Contains(ev.Delivered, to) {
				complete = false
			}
		}
		if complete {
			if p.bus == nil {
				put++
			}
			if err := p.outbox.OutboxDelete(ctx, ev.ID); err != nil {
				// Delivered but not deleted: the sweep delivers it again
				// (at least once).
				errs = append(errs, err)
			}
			continue
		}
		for _, to := range p.destinations() {
			if done[i][to] {
				if err := p.outbox.OutboxDelivered(ctx, ev.ID, to); err != nil {
					// Not noted: that destination gets it again (at least once).
					errs = append(errs, err)
				}
			}
		}
	}
	return put, errors.Join(errs...)
}

// destinations names the bus, when there is one, and every sink.
func (p *Publisher) destinations() []string {
	var to []string
	if p.bus != nil {
		to = append(to, BusDestination)
	}
	for _, s := range p.sinks {
		to = append(to, s.Name())
	}
	return to
}

// putOnBus puts the events the bus has not accepted yet, MaxBatch per
// PutEvents, and marks those it accepts in done.
func (p *Publisher) putOnBus(ctx context.Context, pending []Event, done []map[string]bool) (int, error) {
	var errs []error
	var idx []int
	for i, ev := range pending {
		if !slices.Contains(ev.Delivered, BusDestination) {
			idx = append(idx, i)
		}
	}
	put := 0
	for lo := 0; lo < len(idx); lo += MaxBatch {
		batch := idx[lo:min(lo+MaxBatch, len(idx))]
		entries := make([]ebtypes.PutEventsRequestEntry, len(batch))
		for k, i := range batch {
			ev := pending[i]
			detail, err := json.Marshal(ev.Detail)
			if err != nil {
				return put, fmt.Errorf("event %s: encode detail: %w", ev.ID, err)
			}
			entries[k] = ebtypes.PutEventsRequestEntry{
				EventBusName: aws.String(p.name), Source: aws.String(Source),
				DetailType: aws.String(ev.DetailType), Detail: aws.String(string(detail)),
				Time: aws.Time(ev.Time),
			}
		}
		out, err := p.bus.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: entries})
		if err != nil {
			errs = append(errs, fmt.Errorf("put %d events: %w", len(batch), err))
			continue
		}
		for k, i := range batch {
			ev := pending[i]
			// Entries answer in request order; one with an error code was
			// refused, whatever the others did.
			if k < len(out.Entries) && aws.ToString(out.Entries[k].ErrorCode) != "" {
				errs = append(errs, fmt.Errorf("event %s: %w: %s: %s", ev.ID, ErrEntryFailed,
					aws.ToString(out.Entries[k].ErrorCode), aws.ToString(out.Entries[k].ErrorMessage)))
				continue
			}
			if k >= len(out.Entries) {
				errs = append(errs, fmt.Errorf("event %s: %w: no entry in the answer", ev.ID, ErrEntryFailed))
				continue
			}
			put++
			done[i][BusDestination] = true
		}
	}
	return put, errors.Join(errs...)
}
