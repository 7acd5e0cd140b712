package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// An executor that is killed for memory (a Lambda runtime exit, a Fargate
// container's OOM kill) records nothing as it dies: its tasks' leases just
// lapse. What survives it is its liveness record, so the record carries
// the two signals that tell such a death from any other: the memory the
// executor last reported (the peak since its previous beat, and its limit;
// written with the beat it already makes, so no extra write), and, for a
// Fargate task, a mark that ECS stopped its container for memory (written
// by the control plane from ECS's task state change event).
const (
	aMemUsed  = "mu"   // MiB, the peak since the previous beat
	aMemLimit = "ml"   // MiB
	aOOMKill  = "oomk" // why the executor was killed for memory
)

// ExecutorMemory is an executor's memory as its liveness record holds it.
type ExecutorMemory struct {
	// Alive is until when the executor promised to live (zero: no record).
	Alive time.Time
	// UsedMiB and LimitMiB are its last report (zero: none).
	UsedMiB, LimitMiB int64
	// Killed, when set, says the executor was killed for memory (ECS's
	// stopped reason).
	Killed string
}

// RenewExecutorMemory is RenewExecutor with the executor's memory report:
// the same single write.
func (s *Store) ExecutorRenewMemory(ctx context.Context, id string, until time.Time, usedMiB, limitMiB int64) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(executorPK(id), executorSK),
		UpdateExpression:          aws.String("SET alive = :a, #ttl = :ttl, " + aMemUsed + " = :mu, " + aMemLimit + " = :ml"),
		ConditionExpression:       aws.String("attribute_not_exists(alive) OR alive <= :a"),
		ExpressionAttributeNames:  map[string]string{"#ttl": aTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":a": ms(until), ":ttl": nv(until.Add(executorTTL).Unix()), ":mu": nv(usedMiB), ":ml": nv(limitMiB)},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("renew executor %s: %w", id, err)
	}
	return nil
}

// MarkExecutorKilled records that executor id was killed for memory
// (reason: ECS's stopped reason). The mark never revives the executor:
// its promise (alive) is left as it is. A record that expired through its
// TTL, or never existed, gets one with the mark alone.
func (s *Store) ExecutorMarkKilled(ctx context.Context, id, reason string, now time.Time) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(executorPK(id), executorSK),
		UpdateExpression:          aws.String("SET " + aOOMKill + " = :k, #ttl = if_not_exists(#ttl, :ttl)"),
		ExpressionAttributeNames:  map[string]string{"#ttl": aTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": sv(reason), ":ttl": nv(now.Add(executorTTL).Unix())},
	})
	if err != nil {
		return fmt.Errorf("mark executor %s killed for memory: %w", id, err)
	}
	return nil
}

// ReadExecutorMemory reads executor id's liveness record with its memory.
func (s *Store) ExecutorMemory(ctx context.Context, id string) (ExecutorMemory, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(executorPK(id), executorSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return ExecutorMemory{}, fmt.Errorf("read executor %s: %w", id, err)
	}
	if out.Item == nil {
		return ExecutorMemory{}, nil
	}
	return ExecutorMemory{Alive: getT(out.Item, aAlive), UsedMiB: getN(out.Item, aMemUsed), LimitMiB: getN(out.Item, aMemLimit),
		Killed: getS(out.Item, aOOMKill)}, nil
}

// LostForMemoryParams puts back a task whose holder died for memory
// (sm.TaskLostForMemory).
type LostForMemoryParams struct {
	// Holder is the dead claim as the caller read it; the write requires
	// its token still to hold the task and its executor's liveness record
	// to have lapsed.
	Holder domain.Task
	Now    time.Time
	// Memory is the executor size the next attempt runs on; Err the dead
	// attempt's error (class out_of_memory).
	Memory spec.Size
	Err    string
	// Due is when the sweep looks at the task next (its message should
	// long have been claimed by then).
	Due time.Time
}

// LoseTaskForMemory applies sm.TaskLostForMemory in one transaction with
// the check that the holder's liveness record has lapsed
// (sm.GuardHolderDead), as TakeoverTask does. sm.ErrInvalidTransition
// means the task or the holder moved on.
func (s *Store) TaskLoseForMemory(ctx context.Context, p LostForMemoryParams) (domain.Task, error) {
	ref := p.Holder.Ref
	c := newCond()
	tr := sm.Tasks.Transition(sm.TaskLostForMemory)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	c.values[":old"] = sv(p.Holder.Token)
	c.values[":err"] = sv(p.Err)
	c.values[":ecl"] = sv(string(domain.ClassOutOfMemory))
	c.values[":nb"] = ms(p.Now)
	upd := "SET #st = :to, err = :err, upd = :now, nb = :nb, " + aErrClass + " = :ecl"
	if p.Memory > 0 {
		c.values[":mem"] = nv(int64(p.Memory))
		upd += ", " + aMemory + " = :mem"
	}
	pk := taskPK(ref)
	upd += s.dueClause(c, pk+taskSK(ref.Partition), p.Due)
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(pk, taskSK(ref.Partition)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(expr + " AND tok = :old"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}}, s.executorDead(p.Holder.Executor, p.Now)}})
	if err != nil {
		// A write whose response was lost, retried, finds its own work.
		if t, gerr := s.TaskGet(ctx, ref); gerr == nil && t.State == sm.TaskReady && t.Token == p.Holder.Token &&
			t.LastError == p.Err && t.ErrorClass == domain.ClassOutOfMemory {
			return t, nil
		}
	}
	if reasons := cancelReasons(err); len(reasons) == 2 && (reasons[0] == reasonCondFailed || reasons[1] == reasonCondFailed) {
		return domain.Task{}, fmt.Errorf("%s task %s: %w", sm.TaskLostForMemory, ref, sm.ErrInvalidTransition)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("%s task %s: %w", sm.TaskLostForMemory, ref, err)
	}
	t := p.Holder
	t.State, t.Updated, t.NotBefore = sm.TaskReady, p.Now, p.Now
	t.LastError, t.ErrorClass = p.Err, domain.ClassOutOfMemory
	if p.Memory > 0 {
		t.Memory = p.Memory
	}
	return t, nil
}
