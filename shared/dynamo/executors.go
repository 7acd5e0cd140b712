package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An executor (a long-polling process, a Lambda invocation) keeps one
// liveness record, EXEC#<id>/EXEC, holding the time until which it
// promises to live. It renews the record every second or so for all the
// tasks it holds, so a dead executor's tasks are taken over within
// seconds, while each task's own lease (renewed every lease/3) stays long
// and cheap. Records expire through the table's TTL a day after their
// last renewal.

// executorTTL is how long a dead executor's record is kept.
const executorTTL = 24 * time.Hour

// RenewExecutor records that executor id lives until until.
func (s *Store) ExecutorRenew(ctx context.Context, id string, until time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(executorPK(id), executorSK),
		UpdateExpression: aws.String("SET alive = :a, #ttl = :ttl"),
		// Never move a promise back: a delayed renewal must not shorten
		// what a later one promised.
		ConditionExpression:       aws.String("attribute_not_exists(alive) OR alive <= :a"),
		ExpressionAttributeNames:  map[string]string{"#ttl": aTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ms(until), ":ttl": nv(until.Add(executorTTL).Unix())},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("renew executor %s: %w", id, err)
	}
	return nil
}

// ExecutorAlive reads until when executor id promised to live, or zero if
// it has no record.
func (s *Store) ExecutorAlive(ctx context.Context, id string) (time.Time, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(executorPK(id), executorSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("read executor %s: %w", id, err)
	}
	if out.Item == nil {
		return time.Time{}, nil
	}
	return getT(out.Item, aAlive), nil
}

// TakeoverParams takes over a claim whose executor died, as a new attempt
// for the caller.
type TakeoverParams struct {
	ClaimParams
	// Holder is the dead claim as the caller read it; the write requires
	// its token still to hold the task.
	Holder domain.Task
}

// TakeoverTask applies sm.TaskTakeover in one transaction with a check
// that the holder's liveness record has lapsed (sm.GuardHolderDead), so a
// holder that renewed meanwhile keeps its task. sm.ErrInvalidTransition
// means the task or the holder moved on (renewed, committed, taken over by
// another). A takeover whose response was lost recognises its own token.
func (s *Store) TaskTakeover(ctx context.Context, p TakeoverParams) (domain.Task, error) {
	c := newCond()
	tr := sm.Tasks.Transition(sm.TaskTakeover)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	c.values[":old"] = sv(p.Holder.Token)
	pk := taskPK(p.Ref)
	upd := s.claimUpdate(c, p.ClaimParams, p.Now.Add(p.Lease))
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(expr + " AND tok = :old"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}}, s.executorDead(p.Holder.Executor, p.Now)}})
	if err != nil {
		// A write whose response was lost (and whose retry found its own
		// work done) holds the task with our token.
		if t, gerr := s.TaskGet(ctx, p.Ref); gerr == nil && t.State == sm.TaskClaimed && t.Token == p.Token {
			return t, nil
		}
	}
	if reasons := cancelReasons(err); len(reasons) == 2 && (reasons[0] == reasonCondFailed || reasons[1] == reasonCondFailed) {
		return domain.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, sm.ErrInvalidTransition)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, err)
	}
	// The write succeeded from the holder's record, so the new one is
	// known without reading it back.
	t := p.Holder
	t.State, t.Updated = sm.TaskClaimed, p.Now
	t.Attempt++
	t.Token, t.LeaseUntil, t.Executor = p.Token, p.Now.Add(p.Lease), p.Executor
	if !p.SlotAt.IsZero() {
		t.SlotAt = p.SlotAt
	}
	return t, nil
}

// executorDead is a transaction's check that executor id is dead at now:
// it never beat, or its last beat is older than the liveness skew allows.
// A takeover of its task is written only with it.
func (s *Store) executorDead(id string, now time.Time) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &s.table, Key: key(executorPK(id), executorSK),
		ConditionExpression:       aws.String("attribute_not_exists(alive) OR alive < :expired"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":expired": ms(now.Add(-sm.LivenessSkew))},
	}}
}
