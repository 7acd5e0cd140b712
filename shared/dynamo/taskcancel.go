package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TaskCancelParams fails a task as its owner's cancel (sm.TaskOwnerCancel).
type TaskCancelParams struct {
	Ref domain.TaskRef
	Now time.Time
	// Err is the task's error ("task map/3 cancelled by ..."); its class
	// is domain.ClassCancelled.
	Err string
	// MaxAttempts, when set, is the attempts of a stage whose tasks are
	// not written at materialization (sm.TaskUnwritten): a task with no
	// record is then written FAILED, as its first claim would write it.
	// Zero: a missing record is domain.ErrNotFound.
	MaxAttempts int
	// Due keeps the task in the sweep index until its failure's
	// follow-up (the job's failure, or its stage's completion check) is
	// done.
	Due time.Time
	// Allowed, above 0, is the stage's toleratedFailures allowance and
	// Shards its counter count: the task then fails within the allowance
	// or not at all, in one transaction with its shard's countdown and
	// the stage's count (as TaskFailTolerated); ErrNotTolerated when the
	// allowance is used up, the task untouched.
	Allowed, Shards int
	// Outbox, when set, is the task's failed event, written in the same
	// transaction.
	Outbox *events.Event
}

// TaskCancel fails a READY or CLAIMED task as cancelled by its owner, and
// ends every claim on it: the holder's token, lease and a speculative
// copy's claim go, so no attempt that ran can renew, commit, fail or
// checkpoint it afterwards (each needs CLAIMED and its token).
//
// It is idempotent: a repeat (the SDK's retry of a write whose answer was
// lost, or the owner's second cancel) finds the task FAILED as cancelled
// and answers it as written, counting nothing twice. Other refusals:
// domain.ErrAlreadyDone wrapped with ErrCommitted (the task committed
// first), sm.ErrInvalidTransition (it failed otherwise, or its job's end
// cancelled it), domain.ErrNotFound (no such record), ErrNotTolerated.
func (s *Store) TaskCancel(ctx context.Context, p TaskCancelParams) (domain.Task, error) {
	c := newCond()
	tr := sm.Tasks.Transition(sm.TaskOwnerCancel)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	c.values[":err"] = sv(p.Err)
	c.values[":ecl"] = sv(string(domain.ClassCancelled))
	upd := "SET #st = :to, err = :err, upd = :now, " + aErrClass + " = :ecl"
	if p.MaxAttempts > 0 {
		expr = "attribute_not_exists(pk) OR (" + expr + ")"
		c.values[":mx"] = nv(int64(p.MaxAttempts))
		c.values[":zero"] = nv(0)
		upd += ", mx = if_not_exists(mx, :mx), att = if_not_exists(att, :zero)"
	}
	if p.Allowed > 0 {
		c.values[":t"] = bv(true)
		upd += ", " + aTaskTolerated + " = :t"
	}
	pk := taskPK(p.Ref)
	upd += s.dueClause(c, pk+taskSK(p.Ref.Partition), p.Due) +
		" REMOVE tok, lease, nb, " + copyClaimAttrs
	update := &types.Update{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		ConditionExpression:       aws.String(expr),
		UpdateExpression:          aws.String(upd),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}
	var err error
	if p.Allowed > 0 {
		err = s.cancelTolerated(ctx, p, update)
	} else {
		_, err = s.updateWithOutbox(ctx, &dynamodb.UpdateItemInput{
			TableName: update.TableName, Key: update.Key, ConditionExpression: update.ConditionExpression,
			UpdateExpression: update.UpdateExpression, ExpressionAttributeNames: update.ExpressionAttributeNames,
			ExpressionAttributeValues: update.ExpressionAttributeValues,
		}, p.Outbox)
		if isCondFailed(err) {
			err = errCancelRefused
		}
	}
	if errors.Is(err, errCancelRefused) {
		return s.explainCancel(ctx, p)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("cancel task %s: %w", p.Ref, err)
	}
	return s.TaskGet(ctx, p.Ref)
}

// errCancelRefused: the task's own condition refused the cancel.
var errCancelRefused = errors.New("cancel refused")

// cancelTolerated writes the cancel within the stage's allowance: the
// task, its shard's countdown and the stage's count in one transaction,
// as TaskFailTolerated does for a holder's failure.
func (s *Store) cancelTolerated(ctx context.Context, p TaskCancelParams, task *types.Update) error {
	items := append([]types.TransactWriteItem{{Update: task}}, s.toleratedCount(p.Ref, p.Shards, p.Allowed)...)
	if p.Outbox != nil {
		put, err := s.outboxPut(*p.Outbox)
		if err != nil {
			return err
		}
		items = append(items, put)
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch r := cancelReasons(err); {
	case len(r) >= 3 && r[0] == reasonCondFailed:
		return errCancelRefused
	case len(r) >= 3 && r[2] == reasonCondFailed:
		return fmt.Errorf("stage %d: %w", p.Ref.Stage, ErrNotTolerated)
	case len(r) >= 3 && r[1] == reasonCondFailed:
		return errors.New("its completion counter is missing")
	}
	return err
}

// explainCancel reads a task whose cancel was refused: the task as it
// stands when it is FAILED as cancelled (this very cancel, whose answer
// was lost, or an earlier one: the same result), else why not.
func (s *Store) explainCancel(ctx context.Context, p TaskCancelParams) (domain.Task, error) {
	t, err := s.TaskGet(ctx, p.Ref)
	switch {
	case err != nil:
		return domain.Task{}, fmt.Errorf("cancel task %s: %w", p.Ref, err)
	case t.State == sm.TaskFailed && t.ErrorClass == domain.ClassCancelled:
		return t, nil
	case t.State == sm.TaskSucceeded:
		return t, fmt.Errorf("cancel task %s: %w: %w", p.Ref, ErrCommitted, domain.ErrAlreadyDone)
	}
	return t, fmt.Errorf("cancel task %s (%s): %w", p.Ref, t.State, sm.ErrInvalidTransition)
}
