package dynamo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// The event outbox (shared/events):
//
//	OBX#<event id>                  OBX         an event not yet put on the bus
//
// Each record is written in the same transaction as the state change it
// reports, so it exists exactly when the change happened, and is deleted
// once EventBridge accepted it. Event ids are stable (events.*ID: a job id
// and what happened to it), so each record has a partition key of its
// own: no hot key however many jobs end at once, and a record never
// collides with another job's. A record is in the sweep index (gpk/due,
// spread over DueShards like every other entry) from OutboxGrace after
// its change, so the sweep publishes what its writer did not.
//
// Outbox records are keyed apart from the job's records on purpose: a
// deleted job's pending events are still published (they carry their
// whole detail), then deleted like any other.
const (
	outboxSK      = "OBX"
	aDetailType   = "dt"
	aEventDetail  = "ev"
	outboxPrefix  = "OBX#"
	outboxKindTag = "event"
	// aDelivered is the set of destinations that accepted the event
	// (events.Event.Delivered): a record stays until all did.
	aDelivered = "dlv"
)

// OutboxGrace is how long after its change an outbox record becomes due
// for the sweep: the writer publishes it at once, and a sweep that raced
// it would only put the event twice.
var OutboxGrace = 10 * time.Second

// DueEvent is an outbox record (DueItem.Event is its id).
const DueEvent DueKind = outboxKindTag

func outboxPK(id string) string { return outboxPrefix + id }

// outboxPut is the transaction part that writes ev's outbox record.
func (s *Store) outboxPut(ev events.Event) (types.TransactWriteItem, error) {
	detail, err := json.Marshal(ev.Detail)
	if err != nil {
		return types.TransactWriteItem{}, fmt.Errorf("event %s: encode detail: %w", ev.ID, err)
	}
	pk := outboxPK(ev.ID)
	return types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: map[string]types.AttributeValue{
		attrPK: sv(pk), attrSK: sv(outboxSK),
		aDetailType: sv(ev.DetailType), aEventDetail: sv(string(detail)), aAt: ms(ev.Time),
		attrGPK: sv(duePK(pk + outboxSK)), attrDue: ms(ev.Time.Add(OutboxGrace)),
	}}}, nil
}

// OutboxEvent reads a pending event consistently; found is false when it
// has no record (published and deleted).
func (s *Store) OutboxEvent(ctx context.Context, id string) (events.Event, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(outboxPK(id), outboxSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return events.Event{}, false, fmt.Errorf("read event %s: %w", id, err)
	}
	if out.Item == nil {
		return events.Event{}, false, nil
	}
	ev := events.Event{ID: id, DetailType: getS(out.Item, aDetailType), Time: getT(out.Item, aAt)}
	if ss, ok := out.Item[aDelivered].(*types.AttributeValueMemberSS); ok {
		ev.Delivered = ss.Value
	}
	if err := json.Unmarshal([]byte(getS(out.Item, aEventDetail)), &ev.Detail); err != nil {
		return events.Event{}, false, fmt.Errorf("read event %s: decode detail: %w", id, err)
	}
	return ev, true, nil
}

// DeleteOutboxEvent deletes a published event's record (a missing one is
// no error). It is a transaction's Delete part, as the other deletes of
// the store are (the dynamodb:DeleteItem action).
func (s *Store) OutboxDelete(ctx context.Context, id string) error {
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: &s.table, Key: key(outboxPK(id), outboxSK),
	}}}})
	if err != nil {
		return fmt.Errorf("delete event %s: %w", id, err)
	}
	return nil
}

// OutboxDelivered adds to to the destinations that accepted a pending
// event. The record must still exist: a delete by another publisher is
// final, and no noting may bring the record back.
func (s *Store) OutboxDelivered(ctx context.Context, id, to string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(outboxPK(id), outboxSK),
		UpdateExpression:          aws.String("ADD #d :to"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  map[string]string{"#d": aDelivered},
		ExpressionAttributeValues: map[string]types.AttributeValue{":to": &types.AttributeValueMemberSS{Value: []string{to}}},
	})
	var cf *types.ConditionalCheckFailedException
	if errors.As(err, &cf) {
		return nil // published and deleted meanwhile
	}
	if err != nil {
		return fmt.Errorf("note event %s delivered to %s: %w", id, to, err)
	}
	return nil
}

func parseOutboxKey(pk, sk string) (DueItem, bool) {
	if !strings.HasPrefix(pk, outboxPrefix) || sk != outboxSK {
		return DueItem{}, false
	}
	return DueItem{Kind: DueEvent, Event: strings.TrimPrefix(pk, outboxPrefix)}, true
}

// updateWithOutbox sends in as an UpdateItem, or, with ev set, as a
// transaction with ev's outbox record. A refused condition is returned as
// a *types.ConditionalCheckFailedException either way, and the item's new
// attributes when in asks for them (read back after a transaction).
func (s *Store) updateWithOutbox(ctx context.Context, in *dynamodb.UpdateItemInput, ev *events.Event) (map[string]types.AttributeValue, error) {
	if ev == nil {
		out, err := s.db.UpdateItem(ctx, in)
		if err != nil {
			return nil, err
		}
		return out.Attributes, nil
	}
	put, err := s.outboxPut(*ev)
	if err != nil {
		return nil, err
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: in.TableName, Key: in.Key, UpdateExpression: in.UpdateExpression,
		ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames,
		ExpressionAttributeValues: in.ExpressionAttributeValues,
	}}, put}})
	if r := cancelReasons(err); len(r) > 0 && r[0] == reasonCondFailed {
		return nil, &types.ConditionalCheckFailedException{Message: aws.String("the update's condition failed")}
	}
	if err != nil {
		return nil, err
	}
	if in.ReturnValues != types.ReturnValueAllNew {
		return nil, nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: in.TableName, Key: in.Key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// SubmittedEvent is the event of a job's creation, which CreateJob
// writes to the outbox: its state is RUNNING, or WAITING for a job with a
// start time (j.StartAt), whose start has its own event (StartedEvent).
func SubmittedEvent(j domain.Job) events.Event {
	state := sm.JobRunning
	if !j.StartAt.IsZero() {
		state = sm.JobWaiting
	}
	return events.New(events.SubmittedID(j.ID), events.JobSubmitted, j.Created, events.Detail{
		Owner: j.Owner, JobID: j.ID, JobName: j.Spec.Name, State: string(state),
		Counts: &events.Counts{Stages: len(j.Spec.Stages)},
	})
}

// StartedEvent is the event of a WAITING job's start at now, which
// JobStart writes to the outbox (JobStartParams.Outbox).
func StartedEvent(j domain.Job, now time.Time) events.Event {
	return events.New(events.StartedID(j.ID), events.JobStarted, now, events.Detail{
		Owner: j.Owner, JobID: j.ID, JobName: j.Spec.Name, State: string(sm.JobRunning),
		Counts: &events.Counts{Stages: len(j.Spec.Stages)},
	})
}

// withEventID is ev under another id (a redriven job's ending:
// events.JobEndedID).
func withEventID(ev events.Event, id string) events.Event {
	return events.New(id, ev.DetailType, ev.Time, ev.Detail)
}

// JobEndedEvent is the event of a job's end, with its stages' counts,
// which EndJob writes to the outbox.
func JobEndedEvent(id, owner, name string, to sm.JobState, reason, manifest string, stages []domain.Stage, now time.Time) events.Event {
	c := &events.Counts{Stages: len(stages)}
	for _, st := range stages {
		c.Tasks += st.Total
		if st.State == sm.StageCompleted {
			c.StagesCompleted++
			c.TasksCommitted += st.Total - st.Tolerated
			c.TasksFailed += st.Tolerated
		}
	}
	return events.New(events.EndedID(id), events.JobEndedType(string(to)), now, events.Detail{
		Owner: owner, JobID: id, JobName: name, State: string(to),
		Error: reason, Manifest: manifest, Counts: c,
	})
}
