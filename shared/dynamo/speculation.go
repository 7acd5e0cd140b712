package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Speculative copies (statemachine/speculation.go). A copied task's record
// carries a second claim beside the holder's: its token, lease, executor
// and attempt. The copy takes the next attempt number from att (so its
// outputs have a prefix of their own; while it lives, att is its attempt)
// and raises mx by one, so the copy spends no attempt of the task's
// budget; patt keeps the holder's attempt. A copied record grows by about
// 100 bytes while the copy lives and keeps about 35 (xreq, xat, patt).
// xreq and xat are never removed: a task is copied once.
const (
	aCopyReq   = "xreq" // when the copy was requested
	aCopyAt    = "xat"  // when the copy was claimed
	aCopyTok   = "xtok" // the live copy's token
	aCopyLease = "xlease"
	aCopyEx    = "xex"
	aHolderAtt = "patt"
)

// copyClaimAttrs are the attributes of a live copy's claim.
var copyClaimAttrs = aCopyTok + ", " + aCopyLease + ", " + aCopyEx

func init() {
	guardExprs[sm.GuardNoCopy] = "attribute_not_exists(" + aCopyTok + ")"
	guardExprs[sm.GuardHasCopy] = "attribute_exists(" + aCopyTok + ")"
	guardExprs[sm.GuardAnyTokenMatches] = "(tok = :tok OR " + aCopyTok + " = :tok)"
	guardExprs[sm.GuardCopyTokenMatches] = aCopyTok + " = :tok"
	guardExprs[sm.GuardCopyLeaseExpired] = aCopyLease + " < :expired"
	guardExprs[sm.GuardCopyUnrequested] = "attribute_not_exists(" + aCopyReq + ")"
	guardExprs[sm.GuardCopyRequested] = "attribute_exists(" + aCopyReq + ") AND attribute_not_exists(" + aCopyAt + ")"
}

// decodeCopy reads a task record's copy, nil when it was never copied.
func decodeCopy(it map[string]types.AttributeValue) *domain.CopyState {
	req := getT(it, aCopyReq)
	if req.IsZero() {
		return nil
	}
	c := &domain.CopyState{
		Requested: req, Started: getT(it, aCopyAt), Token: getS(it, aCopyTok),
		LeaseUntil: getT(it, aCopyLease), Executor: getS(it, aCopyEx),
		HolderAttempt: int(getN(it, aHolderAtt)),
	}
	if c.Token != "" {
		c.Attempt = int(getN(it, aAttempt))
	}
	return c
}

// AsCopyClaim is t as its copy's claim: the copy's token, attempt, lease,
// executor and claim time in the holder's places.
func AsCopyClaim(t domain.Task) domain.Task {
	c := t.Copy
	t.Token, t.Attempt, t.LeaseUntil, t.Executor, t.Claimed = c.Token, c.Attempt, c.LeaseUntil, c.Executor, c.Started
	return t
}

// RequestCopy asks for a copy of a claimed task (sm.TaskSpeculate).
// sm.ErrInvalidTransition: the task moved on or was copied already.
func (s *Store) CopyRequest(ctx context.Context, ref domain.TaskRef, now time.Time) error {
	c := newCond()
	expr := transition(c, sm.Tasks.Transition(sm.TaskSpeculate))
	c.values[":now"] = ms(now)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)),
		UpdateExpression:          aws.String("SET " + aCopyReq + " = :now"),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		// A write whose response was lost, and whose retry found its own
		// request, stamped with its time: the copy's message is still to
		// be sent.
		t, gerr := s.TaskGet(ctx, ref)
		if gerr == nil && t.State == sm.TaskClaimed && t.Copy != nil && t.Copy.Started.IsZero() &&
			t.Copy.Requested.Equal(getT(map[string]types.AttributeValue{"t": ms(now)}, "t")) {
			return nil
		}
		return fmt.Errorf("speculate task %s: %w", ref, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("speculate task %s: %w", ref, err)
	}
	return nil
}

// ClaimCopy claims a task's requested copy (sm.TaskClaimCopy) and returns
// the task as the copy's claim (AsCopyClaim). The copy takes no
// concurrency slot: the task holds one for both of its claims. Refusals:
// domain.ErrAlreadyDone (the task ended, or its copy was claimed, or it was
// never requested), as explained by a consistent read.
func (s *Store) CopyClaim(ctx context.Context, p ClaimParams) (domain.Task, error) {
	c := newCond()
	expr := transition(c, sm.Tasks.Transition(sm.TaskClaimCopy))
	lease := p.Now.Add(p.Lease)
	c.values[":now"] = ms(p.Now)
	c.values[":tok"] = sv(p.Token)
	c.values[":lease"] = ms(lease)
	c.values[":one"] = nv(1)
	pk := taskPK(p.Ref)
	upd := "SET " + aCopyTok + " = :tok, " + aCopyLease + " = :lease, " + aCopyAt + " = :now, upd = :now, " +
		aHolderAtt + " = att, att = att + :one, mx = mx + :one"
	if p.Executor != "" {
		c.values[":ex"] = sv(p.Executor)
		upd += ", " + aCopyEx + " = :ex"
	}
	upd += s.dueClause(c, pk+taskSK(p.Ref.Partition), lease.Add(p.Grace))
	// The stage counts its launched copies in the same transaction
	// (speculationstats.go), so exactly once per copy.
	claim := &types.Update{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: claim}, copyLaunchedAdd(s.table, p.Ref)}})
	if r := cancelReasons(err); len(r) == 2 && r[0] != reasonCondFailed && r[1] == reasonCondFailed {
		// No stage item (its job is being deleted): the claim alone, and
		// no stray stage item is created to count it on.
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: claim.TableName, Key: claim.Key, UpdateExpression: claim.UpdateExpression,
			ConditionExpression: claim.ConditionExpression, ExpressionAttributeNames: claim.ExpressionAttributeNames,
			ExpressionAttributeValues: claim.ExpressionAttributeValues,
		})
		if isCondFailed(err) {
			err = nil // explained by the read below
		}
	}
	// A transaction returns no item: the claim is read back, and is ours
	// when the record carries our token (also after a refusal: the write
	// applied and its answer was lost). Read after a win, a task that
	// moved on at once (its holder committed) has no copy to run.
	if len(cancelReasons(err)) > 0 {
		err = nil
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("claim copy of task %s: %w", p.Ref, err)
	}
	t, gerr := s.TaskGet(ctx, p.Ref)
	if gerr != nil {
		return domain.Task{}, fmt.Errorf("claim copy of task %s: %w", p.Ref, gerr)
	}
	if t.Copy != nil && t.Copy.Token == p.Token {
		return AsCopyClaim(t), nil // our own claim, its response lost
	}
	return t, fmt.Errorf("claim copy of task %s (%s, copy requested %v, started %v): %w",
		p.Ref, t.State, t.Copy != nil, t.Copy != nil && !t.Copy.Started.IsZero(), domain.ErrAlreadyDone)
}

// CopyHeartbeat extends the copy's lease (sm.TaskCopyHeartbeat);
// domain.ErrStaleClaim when the caller no longer holds the copy (it ended,
// or it became the task's holder: the caller then beats as the holder).
func (s *Store) CopyHeartbeat(ctx context.Context, p HolderParams, lease, grace time.Duration) error {
	c := newCond()
	expr := transition(c, sm.Tasks.Transition(sm.TaskCopyHeartbeat))
	until := p.Now.Add(lease)
	c.values[":tok"] = sv(p.Token)
	c.values[":lease"] = ms(until)
	c.values[":now"] = ms(p.Now)
	pk := taskPK(p.Ref)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String("SET " + aCopyLease + " = :lease, upd = :now" + s.dueClause(c, pk+taskSK(p.Ref.Partition), until.Add(grace))),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return fmt.Errorf("copy heartbeat task %s: %w", p.Ref, domain.ErrStaleClaim)
	}
	if err != nil {
		return fmt.Errorf("copy heartbeat task %s: %w", p.Ref, err)
	}
	return nil
}

// DropParams drops one of a copied task's two claims.
type DropParams struct {
	HolderParams // Token: the dropping claim's (unused for TaskCopyExpire)
	// Event is sm.TaskYield (the holder's attempt failed: its copy becomes
	// the holder), sm.TaskCopyFail (the copy's attempt failed) or
	// sm.TaskCopyExpire (the copy's lease ran out).
	Event sm.Event
	Err   string
	// Copy is the copy as the caller read it, for a yield: its executor
	// moves to the holder's place.
	Copy domain.CopyState
}

// DropClaim applies p.Event. The task stays CLAIMED under the other claim
// and spends no attempt. domain.ErrStaleClaim (holder events) or
// sm.ErrInvalidTransition (TaskCopyExpire): the task moved on.
func (s *Store) TaskDropClaim(ctx context.Context, p DropParams) (domain.Task, error) {
	c := newCond()
	tr := sm.Tasks.Transition(p.Event)
	expr := transition(c, tr)
	c.values[":now"] = ms(p.Now)
	upd := "SET upd = :now"
	remove := " REMOVE " + copyClaimAttrs
	switch p.Event {
	case sm.TaskYield:
		c.values[":tok"] = sv(p.Token)
		c.values[":ctok"] = sv(p.Copy.Token)
		// The copy read is the live one: its token is in the condition.
		expr += " AND " + aCopyTok + " = :ctok"
		upd += ", tok = " + aCopyTok + ", lease = " + aCopyLease + ", " + aClaimed + " = " + aCopyAt
		if p.Copy.Executor != "" {
			upd += ", ex = " + aCopyEx
		} else {
			remove += ", ex"
		}
		remove += ", " + aHolderAtt
	case sm.TaskCopyFail:
		c.values[":tok"] = sv(p.Token)
	case sm.TaskCopyExpire:
		bindLeaseExpired(c, p.Now)
	default:
		return domain.Task{}, fmt.Errorf("drop claim of task %s: event %q is no drop", p.Ref, p.Event)
	}
	if p.Err != "" {
		c.values[":err"] = sv(p.Err)
		upd += ", err = :err"
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(taskPK(p.Ref), taskSK(p.Ref.Partition)),
		UpdateExpression:          aws.String(upd + remove),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		if p.Event == sm.TaskCopyExpire {
			return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, sm.ErrInvalidTransition)
		}
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, domain.ErrStaleClaim)
	}
	if err != nil {
		return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
	}
	return decodeTask(p.Ref, out.Attributes), nil
}

// durationAttr is the counter-shard attribute of duration bucket b.
func durationAttr(b int) string { return "h" + strconv.Itoa(b) }

// StageDurations sums the duration histograms of a stage's counter shards
// (consistent batch reads, one per 100 shards): the durations of its
// committed attempts, claim to commit.
func (s *Store) StageDurations(ctx context.Context, job string, stage, shards int) (domain.Durations, error) {
	var d domain.Durations
	for lo := 0; lo < shards; lo += 100 {
		var keys []map[string]types.AttributeValue
		for k := lo; k < min(lo+100, shards); k++ {
			keys = append(keys, key(shardPK(job, stage, k), cntSK))
		}
		for len(keys) > 0 {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: keys, ConsistentRead: aws.Bool(true)}},
			})
			if err != nil {
				return d, fmt.Errorf("read durations of stage %s/%d: %w", job, stage, err)
			}
			for _, it := range out.Responses[s.table] {
				for b := range d.Buckets {
					d.Buckets[b] += getN(it, durationAttr(b))
				}
			}
			keys = out.UnprocessedKeys[s.table].Keys
		}
	}
	return d, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
