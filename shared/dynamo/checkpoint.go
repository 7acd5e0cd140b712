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

// Attributes of a task's last checkpoint (domain.CheckpointRef): the
// attempt and number that saved it, its input offset, and the task's
// continuations. The checkpoint itself is in S3.
// Short names: they are on every checkpointed task record, which must
// stay within one write unit (TaskItemSize).
const (
	aCkAttempt = "ka"
	aCkSeq     = "ks"
	aCkOffset  = "ko"
	aCont      = "kc"
)

func init() {
	// The guards of TaskContinue, on the task record: the checkpoint is
	// the current attempt's, and the task has continuations left (the
	// caller binds :maxcont).
	// Beside a speculative copy that ended, the holder's attempt is patt
	// (speculation.go): the copy took att.
	guardExprs[sm.GuardCheckpointed] = "(" + aCkAttempt + " = att OR (" + aCkAttempt + " = " + aHolderAtt +
		" AND attribute_not_exists(" + aCopyTok + ")))"
	guardExprs[sm.GuardContinuationsLeft] = "(attribute_not_exists(" + aCont + ") OR " + aCont + " < :maxcont)"
}

func decodeCheckpointRef(it map[string]types.AttributeValue) domain.CheckpointRef {
	return domain.CheckpointRef{
		Attempt: int(getN(it, aCkAttempt)), Seq: int(getN(it, aCkSeq)),
		Offset: getN(it, aCkOffset), Continuations: int(getN(it, aCont)),
	}
}

// CheckpointParams records the holder's checkpoint on its task.
type CheckpointParams struct {
	HolderParams
	Attempt int
	Seq     int
	Offset  int64
}

// CheckpointTask points the task at the holder's checkpoint (already in
// S3), fenced by the claim token (sm.TaskCheckpoint): a stale attempt's
// write is refused with domain.ErrStaleClaim, so no later attempt ever
// resumes from a checkpoint saved after its saver lost the task.
func (s *Store) TaskCheckpoint(ctx context.Context, p CheckpointParams) error {
	c := newCond()
	expr := transition(c, sm.Tasks.Transition(sm.TaskCheckpoint))
	c.values[":tok"] = sv(p.Token)
	c.values[":now"] = ms(p.Now)
	c.values[":att"] = nv(int64(p.Attempt))
	c.values[":seq"] = nv(int64(p.Seq))
	c.values[":off"] = nv(p.Offset)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(p.Ref), taskSK(p.Ref.Partition)),
		UpdateExpression: aws.String("SET " + aCkAttempt + " = :att, " + aCkSeq + " = :seq, " + aCkOffset + " = :off, upd = :now"),
		// att = :att: the token names the attempt already; this keeps a
		// record whose token was reused (never, tokens are fresh) honest.
		// A holder whose task was copied has its attempt in patt: the
		// copy took att (speculation.go).
		ConditionExpression:       aws.String(expr + " AND (att = :att OR " + aHolderAtt + " = :att)"),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return fmt.Errorf("checkpoint task %s attempt %d: %w", p.Ref, p.Attempt, domain.ErrStaleClaim)
	}
	if err != nil {
		return fmt.Errorf("checkpoint task %s: %w", p.Ref, err)
	}
	return nil
}

// ContinueParams hands the holder's checkpointed task on to a new
// invocation.
type ContinueParams struct {
	HolderParams
	Msg string
	// Due is when the sweep checks the task next (its message should
	// long have been claimed by then).
	Due time.Time
	// Attempt and Continuations are the holder's claim's (0: not
	// known). A retry whose first write applied (its response lost)
	// finds the task READY at that attempt with one continuation more,
	// which only this holder's token could make, and takes it as its
	// own instead of as a lost claim.
	Attempt, Continuations int
}

// ContinueTask applies sm.TaskContinue: the task goes back to READY, due
// at once, with one more attempt allowed (mx + 1), so the next claim's
// attempt is a new one (its own token and output keys) that does not
// count against the stage's retries; cont counts the continuations.
// sm.ErrInvalidTransition wrapped in the error says which guard failed is
// not known here: the caller reads the task to tell a stale claim
// (domain.ErrStaleClaim) from a refused continuation.
func (s *Store) TaskContinue(ctx context.Context, p ContinueParams) (domain.Task, error) {
	c := newCond()
	tr := sm.Tasks.Transition(sm.TaskContinue)
	expr := transition(c, tr)
	to(c, tr)
	c.values[":tok"] = sv(p.Token)
	c.values[":now"] = ms(p.Now)
	c.values[":one"] = nv(1)
	c.values[":maxcont"] = nv(sm.MaxContinuations)
	c.values[":err"] = sv(p.Msg)
	pk := taskPK(p.Ref)
	upd := "SET #st = :to, upd = :now, nb = :now, err = :err, " + aMax + " = " + aMax + " + :one" +
		s.dueClause(c, pk+taskSK(p.Ref.Partition), p.Due) + " ADD " + aCont + " :one"
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		t, gerr := s.TaskGet(ctx, p.Ref)
		if gerr != nil {
			return domain.Task{}, fmt.Errorf("continue task %s: %w", p.Ref, gerr)
		}
		if p.Attempt > 0 && t.State == sm.TaskReady && t.Attempt == p.Attempt &&
			t.Checkpoint.Continuations == p.Continuations+1 && t.LastError == p.Msg {
			return t, nil // its own write, whose response was lost
		}
		if t.Token != p.Token || t.State != sm.TaskClaimed {
			return t, fmt.Errorf("continue task %s: %w", p.Ref, domain.ErrStaleClaim)
		}
		_, derr := sm.Decide(t.View(), sm.TaskContinue, sm.TaskInput{At: p.Now, Token: p.Token})
		if derr == nil {
			derr = sm.ErrInvalidTransition
		}
		return t, fmt.Errorf("continue task %s: %w", p.Ref, derr)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("continue task %s: %w", p.Ref, err)
	}
	return decodeTask(p.Ref, out.Attributes), nil
}

// TimelineRecord writes a task event to the job's timeline only (no
// attempt-end record, no failure count): a resume from a checkpoint, a
// speculative copy's start or win. Best effort history: the caller logs a
// failure.
func (s *Store) TimelineRecord(ctx context.Context, e domain.AttemptEnd) error {
	ref := e.Ref
	it := map[string]types.AttributeValue{
		attrPK: sv(eventPK(ref.Job, ref.Partition%EventShards)),
		attrSK: sv(EventKey(e.At, EventClassTask, taskEventRest(ref, e.Attempt)+"#"+string(e.Kind))),
		aKind:  sv(string(e.Kind)), aAt: ms(e.At),
		aStageIdx: nv(int64(ref.Stage)), aPart: nv(int64(ref.Partition)), aAttempt: nv(int64(e.Attempt)),
	}
	if e.Err != "" {
		it[aErr] = sv(e.Err)
	}
	if err := s.putHistory(ctx, ref.Job, it); err != nil { // not once the job is being deleted: jobdelete.go
		return fmt.Errorf("record %s of %s attempt %d: %w", e.Kind, ref, e.Attempt, err)
	}
	return nil
}
