package dynamo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

// aTolerated is, on a stage record, how many of its tasks failed within
// its toleratedFailures allowance; aTaskTolerated, on a task record
// (true), that its failure was one of them.
const (
	aTolerated     = "tfl"
	aTaskTolerated = "tol"
)

// ErrNotTolerated means a stage refused to tolerate one more failed task:
// its allowance is used up (or it is not running). The task is untouched;
// the caller fails it the ordinary way, which fails the job.
var ErrNotTolerated = fmt.Errorf("failure not tolerated")

// TolerateParams fails a task for good within its stage's allowance.
type TolerateParams struct {
	Ref domain.TaskRef
	// Event is the task's failing event: the holder's TaskFail or
	// TaskFailPermanent (Token set), or the sweep's TaskExhaust.
	Event sm.Event
	Token string
	Now   time.Time
	Err   string
	// Due keeps the task in the sweep index until its failure's follow-up
	// (its stage's completion check) is done.
	Due time.Time
	// Shards is the stage's counter count; Allowed its allowance.
	Shards  int
	Allowed int
	// Outbox, when set, is the task's failed event, written in the same
	// transaction.
	Outbox *events.Event
	// Class is Err's class, kept with it.
	Class domain.ErrorClass
}

// FailTolerated fails a task and, in the same transaction, counts it down
// on its completion shard as finished and counts it on its stage's
// tolerated failures under the stage's allowance (sm.StageTolerate). So
// a failure either is tolerated whole (the stage can complete without the
// task) or not at all, and concurrent failures can never pass the
// allowance: each transaction's guard reads the count the others wrote.
//
// ErrNotTolerated: the stage's guard refused, the task is unchanged.
// domain.ErrStaleClaim (holder events) or sm.ErrInvalidTransition (the
// sweep's): the task moved on.
func (s *Store) TaskFailTolerated(ctx context.Context, p TolerateParams) (domain.Task, error) {
	tc := newCond()
	tr := sm.Tasks.Transition(p.Event)
	texpr := transition(tc, tr)
	to(tc, tr)
	tc.values[":now"] = ms(p.Now)
	tc.values[":err"] = sv(p.Err)
	tc.values[":t"] = bv(true)
	if slices.Contains(tr.Guards, sm.GuardTokenMatches) {
		tc.values[":tok"] = sv(p.Token)
	}
	if slices.Contains(tr.Guards, sm.GuardLeaseExpired) {
		bindLeaseExpired(tc, p.Now)
	}
	upd := "SET #st = :to, err = :err, upd = :now, " + aTaskTolerated + " = :t"
	if p.Class != domain.ClassNone {
		tc.values[":ecl"] = sv(string(p.Class))
		upd += ", " + aErrClass + " = :ecl"
	}
	pk := taskPK(p.Ref)
	upd += s.dueClause(tc, pk+taskSK(p.Ref.Partition), p.Due)

	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		ConditionExpression:       aws.String(texpr),
		UpdateExpression:          aws.String(upd),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: tc.values,
	}}}
	items = append(items, s.toleratedCount(p.Ref, p.Shards, p.Allowed)...)
	if p.Outbox != nil {
		put, err := s.outboxPut(*p.Outbox)
		if err != nil {
			return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
		}
		items = append(items, put)
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	switch r := cancelReasons(err); {
	case len(r) >= 3 && r[0] == reasonCondFailed:
		if p.Event == sm.TaskExhaust {
			return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, sm.ErrInvalidTransition)
		}
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, domain.ErrStaleClaim)
	case len(r) >= 3 && r[2] == reasonCondFailed:
		return domain.Task{}, fmt.Errorf("%s task %s: stage %d: %w", p.Event, p.Ref, p.Ref.Stage, ErrNotTolerated)
	case len(r) >= 3 && r[1] == reasonCondFailed:
		return domain.Task{}, fmt.Errorf("%s task %s: its completion counter is missing", p.Event, p.Ref)
	case err != nil:
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
	}
	return s.TaskGet(ctx, p.Ref)
}

// StageTolerated reads how many of a stage's tasks failed within its
// allowance.
func (s *Store) StageTolerated(ctx context.Context, job string, idx int) (int, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(aTolerated),
	})
	if err != nil {
		return 0, fmt.Errorf("read tolerated failures of stage %s/%d: %w", job, idx, err)
	}
	return int(getN(out.Item, aTolerated)), nil
}

// toleratedCount is the two items a tolerated end of a task adds to the
// task's own write: its shard's countdown, so the stage can complete
// without it, and the stage's tolerated count, guarded by the allowance.
// The stage stays RUNNING (a self-transition): only its count moves.
func (s *Store) toleratedCount(ref domain.TaskRef, shards, allowed int) []types.TransactWriteItem {
	sc := newCond()
	sexpr := transition(sc, sm.Stages.Transition(sm.StageTolerate))
	sc.values[":allowed"] = nv(int64(allowed))
	sc.values[":one"] = nv(1)
	return []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(shardPK(ref.Job, ref.Stage, ShardOf(ref.Partition, shards)), cntSK),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		UpdateExpression:          aws.String("ADD #left :minus"),
		ExpressionAttributeNames:  map[string]string{"#left": aLeft},
		ExpressionAttributeValues: map[string]types.AttributeValue{":minus": nv(-1)},
	}}, {Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(ref.Job), stageSK(ref.Stage)),
		ConditionExpression:       aws.String(sexpr),
		UpdateExpression:          aws.String("ADD " + aTolerated + " :one"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: sc.values,
	}}}
}
