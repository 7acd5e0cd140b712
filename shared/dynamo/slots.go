package dynamo

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batch"
)

// A job with a concurrency limit has one slot item next to its job record:
// a map from task id to the time its slot was taken. A task takes a slot
// before its claim, with a condition that the map holds fewer than the
// limit, and gives it back when its attempt ends. Keying by task makes a
// duplicate delivery or a reclaim of the same task reuse its slot instead
// of taking a second, and makes a release idempotent. A slot whose holder
// died is found and freed by ReapSlots (see control).
const (
	slotsSK   = "SLOTS"
	aSlotMap  = "sl"
	slotNames = "#r"
)

// slotItem is the empty slot map, written with the job.
func slotItem(job string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: sv(jobPK(job)), attrSK: sv(slotsSK),
		aSlotMap: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
}

// SlotOutcome says what AcquireSlot did.
type SlotOutcome int

const (
	// SlotTaken: this call took a new slot for the task.
	SlotTaken SlotOutcome = iota
	// SlotHeld: the task already holds a slot (a duplicate delivery, or a
	// reclaim after its executor died); nothing was written.
	SlotHeld
	// SlotsFull: the job is at its limit.
	SlotsFull
)

// AcquireSlot takes one of the job's limit slots for ref, stamped with at.
func (s *Store) AcquireSlot(ctx context.Context, ref batch.TaskRef, limit int, at time.Time) (SlotOutcome, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(ref.Job), slotsSK),
		UpdateExpression:         aws.String("SET sl." + slotNames + " = :at"),
		ConditionExpression:      aws.String("attribute_exists(sl) AND attribute_not_exists(sl." + slotNames + ") AND size(sl) < :max"),
		ExpressionAttributeNames: map[string]string{slotNames: ref.String()},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":at": ms(at), ":max": nv(int64(limit)),
		},
	})
	if err == nil {
		return SlotTaken, nil
	}
	if !isCondFailed(err) {
		return 0, fmt.Errorf("acquire slot for %s: %w", ref, err)
	}
	holders, err := s.SlotHolders(ctx, ref.Job)
	if err != nil {
		return 0, fmt.Errorf("acquire slot for %s: %w", ref, err)
	}
	if _, ok := holders[ref]; ok {
		return SlotHeld, nil
	}
	return SlotsFull, nil
}

// ReleaseSlot frees ref's slot. With at set, only the slot taken at that
// time is freed (a claim that took a slot and then was refused gives back
// its own, never a newer one). Releasing a free slot is a no-op.
func (s *Store) ReleaseSlot(ctx context.Context, ref batch.TaskRef, at time.Time) error {
	in := &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(ref.Job), slotsSK),
		UpdateExpression:         aws.String("REMOVE sl." + slotNames),
		ConditionExpression:      aws.String("attribute_exists(sl." + slotNames + ")"),
		ExpressionAttributeNames: map[string]string{slotNames: ref.String()},
	}
	if !at.IsZero() {
		in.ConditionExpression = aws.String("sl." + slotNames + " = :at")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":at": ms(at)}
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil && !isCondFailed(err) {
		return fmt.Errorf("release slot of %s: %w", ref, err)
	}
	return nil
}

// SlotHolders reads the job's taken slots, consistently: task to the time
// its slot was taken.
func (s *Store) SlotHolders(ctx context.Context, job string) (map[batch.TaskRef]time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), slotsSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read slots of job %s: %w", job, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("read slots of job %s: %w", job, batch.ErrNotFound)
	}
	m, _ := out.Item[aSlotMap].(*types.AttributeValueMemberM)
	holders := map[batch.TaskRef]time.Time{}
	if m == nil {
		return holders, nil
	}
	for id, v := range m.Value {
		ref, err := batch.ParseTaskRef(id)
		if err != nil {
			return nil, fmt.Errorf("slots of job %s: %w", job, err)
		}
		n, _ := v.(*types.AttributeValueMemberN)
		var msv int64
		if n != nil {
			msv, _ = strconv.ParseInt(n.Value, 10, 64)
		}
		holders[ref] = time.UnixMilli(msv).UTC()
	}
	return holders, nil
}

// OldestHolders returns up to n holders, oldest slot first.
func OldestHolders(holders map[batch.TaskRef]time.Time, n int) []batch.TaskRef {
	refs := make([]batch.TaskRef, 0, len(holders))
	for r := range holders {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return holders[refs[i]].Before(holders[refs[j]]) })
	return refs[:min(n, len(refs))]
}
