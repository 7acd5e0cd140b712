package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
}

// MaxBatch is how many entries one PutEvents takes.
const MaxBatch = 10

// Publisher puts pending events on one bus and deletes their records.
type Publisher struct {
	bus    Bus
	name   string
	outbox Outbox
}

// NewPublisher returns a publisher to the bus named busName.
func NewPublisher(bus Bus, busName string, outbox Outbox) *Publisher {
	return &Publisher{bus: bus, name: busName, outbox: outbox}
}

// BusName is the bus the publisher puts events on.
func (p *Publisher) BusName() string { return p.name }

// ErrEntryFailed means EventBridge refused some entries of a PutEvents
// (FailedEntryCount); their records stay for the sweep to publish again.
var ErrEntryFailed = errors.New("eventbridge refused an entry")

// Publish puts the pending events named by ids on the bus, MaxBatch per
// PutEvents, and deletes the record of each entry EventBridge accepted.
// An id without a record was published already and is skipped. Entries
// refused (a partial failure) or not sent keep their records, and the
// error says which. It returns how many events were put.
func (p *Publisher) Publish(ctx context.Context, ids ...string) (int, error) {
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
	put := 0
	for lo := 0; lo < len(pending); lo += MaxBatch {
		batch := pending[lo:min(lo+MaxBatch, len(pending))]
		entries := make([]ebtypes.PutEventsRequestEntry, len(batch))
		for i, ev := range batch {
			detail, err := json.Marshal(ev.Detail)
			if err != nil {
				return put, fmt.Errorf("event %s: encode detail: %w", ev.ID, err)
			}
			entries[i] = ebtypes.PutEventsRequestEntry{
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
		for i, ev := range batch {
			// Entries answer in request order; one with an error code was
			// refused, whatever the others did.
			if i < len(out.Entries) && aws.ToString(out.Entries[i].ErrorCode) != "" {
				errs = append(errs, fmt.Errorf("event %s: %w: %s: %s", ev.ID, ErrEntryFailed,
					aws.ToString(out.Entries[i].ErrorCode), aws.ToString(out.Entries[i].ErrorMessage)))
				continue
			}
			if i >= len(out.Entries) {
				errs = append(errs, fmt.Errorf("event %s: %w: no entry in the answer", ev.ID, ErrEntryFailed))
				continue
			}
			put++
			if err := p.outbox.OutboxDelete(ctx, ev.ID); err != nil {
				// Put but not deleted: the sweep puts it again (at least once).
				errs = append(errs, err)
			}
		}
	}
	return put, errors.Join(errs...)
}
