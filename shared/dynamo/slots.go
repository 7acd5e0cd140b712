package dynamo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
)

// A concurrency limit is kept in a slot item: a map from task to the time
// its slot was taken. A job with a limit has one next to its job record
// (JOB#<job>/SLOTS, written with the job); an owner with a limit has one
// under its job index (OWN#<owner>/SLOTS, created by the first acquire:
// the owner index's sort keys all start with JOB#, so SLOTS collides with
// none and its Query never returns it). A task takes a slot before its
// claim, with a condition that the map holds fewer than the limit, and
// gives it back when its attempt ends. Keying by task makes a duplicate
// delivery or a reclaim of the same task reuse its slot instead of taking
// a second, and makes a release idempotent; an owner's map spans that
// owner's jobs, so its keys are whole task refs. A slot whose holder died
// is found and freed by the reaper (see control).
//
// The whole map is one item, so every acquire and release is billed by
// its size: about 40 bytes per holder (a task ref of ~30 characters and a
// millisecond time), so 1 KB (1 WCU) per ~25 holders.
const (
	slotsSK   = "SLOTS"
	aSlotMap  = "sl"
	slotNames = "#r"
)

// SlotMap names one slot item: a job's or an owner's.
type SlotMap struct {
	pk    string
	owner bool
	name  string
}

// JobSlots is the slot map of a job's maxConcurrency.
func JobSlots(job string) SlotMap { return SlotMap{pk: jobPK(job), name: job} }

// OwnerSlots is the slot map of an owner's concurrency limit.
func OwnerSlots(owner string) SlotMap { return SlotMap{pk: ownerPK(owner), owner: true, name: owner} }

func (m SlotMap) String() string {
	if m.owner {
		return "owner " + m.name
	}
	return "job " + m.name
}

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
	// SlotsFull: the map is at its limit.
	SlotsFull
)

// AcquireSlot takes one of m's limit slots for ref, stamped with at. In
// the common case it is one conditional UpdateItem; only a refusal reads
// the map (to tell a held slot from a full map). An owner's map that does
// not exist yet is created holding ref's slot.
//
// For SlotHeld it also returns the held slot's stamp.
func (s *Store) SlotAcquire(ctx context.Context, m SlotMap, ref domain.TaskRef, limit int, at time.Time) (SlotOutcome, time.Time, error) {
	for try := 0; ; try++ {
		_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: key(m.pk, slotsSK),
			UpdateExpression:         aws.String("SET sl." + slotNames + " = :at"),
			ConditionExpression:      aws.String("attribute_exists(sl) AND attribute_not_exists(sl." + slotNames + ") AND size(sl) < :max"),
			ExpressionAttributeNames: map[string]string{slotNames: ref.String()},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":at": ms(at), ":max": nv(int64(limit)),
			},
		})
		if err == nil {
			return SlotTaken, time.Time{}, nil
		}
		if !isCondFailed(err) {
			return 0, time.Time{}, fmt.Errorf("acquire %s slot for %s: %w", m, ref, err)
		}
		holders, err := s.SlotHolders(ctx, m)
		if errors.Is(err, domain.ErrNotFound) && m.owner && try == 0 {
			created, err := s.createSlots(ctx, m, ref, at)
			if err != nil || created {
				return SlotTaken, time.Time{}, err
			}
			continue // another claim created it first: acquire in it
		}
		if err != nil {
			return 0, time.Time{}, fmt.Errorf("acquire %s slot for %s: %w", m, ref, err)
		}
		if held, ok := holders[ref]; ok {
			return SlotHeld, held, nil
		}
		return SlotsFull, time.Time{}, nil
	}
}

// RestampSlot moves ref's slot in m from stamp from to stamp to, so that
// a new attempt taking over its task's slot owns it: the earlier attempt's
// release names the old stamp and then leaves the slot alone. False if the
// slot no longer has stamp from (freed or restamped meanwhile).
func (s *Store) SlotRestamp(ctx context.Context, m SlotMap, ref domain.TaskRef, from, to time.Time) (bool, error) {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(m.pk, slotsSK),
		UpdateExpression:          aws.String("SET sl." + slotNames + " = :to"),
		ConditionExpression:       aws.String("sl." + slotNames + " = :from"),
		ExpressionAttributeNames:  map[string]string{slotNames: ref.String()},
		ExpressionAttributeValues: map[string]types.AttributeValue{":from": ms(from), ":to": ms(to)},
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("restamp %s slot of %s: %w", m, ref, err)
	}
	return true, nil
}

// createSlots creates an owner's slot map holding ref's slot; false if
// the map exists already.
func (s *Store) createSlots(ctx context.Context, m SlotMap, ref domain.TaskRef, at time.Time) (bool, error) {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			attrPK: sv(m.pk), attrSK: sv(slotsSK),
			aSlotMap: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{ref.String(): ms(at)}},
		},
		ConditionExpression: aws.String("attribute_not_exists(pk)"),
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("create %s slots for %s: %w", m, ref, err)
	}
	return true, nil
}

// ReleaseSlot frees ref's slot in m. With at set, only the slot taken at
// that time is freed (a claim that took a slot and then was refused gives
// back its own, never a newer one). Releasing a free slot, or one of a
// map that does not exist, is a no-op.
func (s *Store) SlotRelease(ctx context.Context, m SlotMap, ref domain.TaskRef, at time.Time) error {
	in := &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(m.pk, slotsSK),
		UpdateExpression:         aws.String("REMOVE sl." + slotNames),
		ConditionExpression:      aws.String("attribute_exists(sl." + slotNames + ")"),
		ExpressionAttributeNames: map[string]string{slotNames: ref.String()},
	}
	if !at.IsZero() {
		in.ConditionExpression = aws.String("sl." + slotNames + " = :at")
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":at": ms(at)}
	}
	if _, err := s.db.UpdateItem(ctx, in); err != nil && !isCondFailed(err) {
		return fmt.Errorf("release %s slot of %s: %w", m, ref, err)
	}
	return nil
}

// SlotHolders reads m's taken slots, consistently: task to the time its
// slot was taken. domain.ErrNotFound if the map does not exist (a job
// without a limit; an owner whose tasks never took a slot).
func (s *Store) SlotHolders(ctx context.Context, m SlotMap) (map[domain.TaskRef]time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(m.pk, slotsSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read slots of %s: %w", m, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("read slots of %s: %w", m, domain.ErrNotFound)
	}
	sl, _ := out.Item[aSlotMap].(*types.AttributeValueMemberM)
	holders := map[domain.TaskRef]time.Time{}
	if sl == nil {
		return holders, nil
	}
	for id, v := range sl.Value {
		ref, err := domain.ParseTaskRef(id)
		if err != nil {
			return nil, fmt.Errorf("slots of %s: %w", m, err)
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
func OldestHolders(holders map[domain.TaskRef]time.Time, n int) []domain.TaskRef {
	refs := make([]domain.TaskRef, 0, len(holders))
	for r := range holders {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool { return holders[refs[i]].Before(holders[refs[j]]) })
	return refs[:min(n, len(refs))]
}
