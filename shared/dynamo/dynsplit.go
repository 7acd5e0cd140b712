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
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrSplitRefused: a running task's split was not shrunk. Its holder lost
// the claim, its range changed, the task has a speculative copy (which
// reads the range it was claimed with), or its stage is not running,
// not fully materialized or at its task limit. The holder reads on to
// its old end.
var ErrSplitRefused = errors.New("split refused")

// SplitTaskParams gives away the unread rest [At, End) of a running
// task's input as new tasks of its stage (dynamic splitting).
type SplitTaskParams struct {
	Ref     domain.TaskRef
	Token   string
	Attempt int
	// Input is the holder's split as it reads it; the giver keeps
	// [Input.Start, At), Give covers [At, Input.End) in order.
	Input split.Split
	At    int64
	Give  []split.Split
	// MaxAttempts of the new tasks; MaxTotal caps the stage's task count.
	MaxAttempts, MaxTotal int
	// MaxQuotaTasks is the owner's tasks quota now (0: no limit): a
	// counted job's split charges the tasks it adds (quotacharge.go).
	MaxQuotaTasks int
	Now           time.Time
	// Due is the new tasks' first sweep look (as materialize's).
	Due time.Time
	// Message is the history line, recorded with the split.
	Message func(first, last int) string
}

// SplitKind is the timeline kind of a dynamic split.
const SplitKind domain.AttemptEndKind = "split"

// splitTries bounds the retries of a split that lost a race for the
// stage's task count to another split of the same stage.
const splitTries = 4

// SplitTask shrinks the holder's split to [Start, At) and adds one READY
// task per piece of Give, numbered after the stage's last task, in one
// transaction that also raises the stage's task count and its completion
// counters by as many: the stage's totals are never off, not even for a
// moment, so it can complete only when the new tasks have committed too.
//
// The giver is guarded by its claim token (a fenced holder gives
// nothing, and its successor attempt reads the shrunk range), by its
// range (a split happens once per range), and by having no speculative
// copy; the stage by being RUNNING, materialized (the materializer owns
// the count until then) and at the count read before (a concurrent split
// of another task retries with the new count). It returns the first new
// partition.
func (s *Store) TaskSplit(ctx context.Context, p SplitTaskParams) (first int, err error) {
	if len(p.Give) == 0 || p.At <= p.Input.Start || p.At >= p.Input.End {
		return 0, fmt.Errorf("split task %s at %d: %w: nothing to give", p.Ref, p.At, ErrSplitRefused)
	}
	head, err := s.jobHead(ctx, p.Ref.Job)
	if err != nil {
		return 0, fmt.Errorf("split task %s: %w: %w", p.Ref, err, ErrSplitRefused)
	}
	for try := 0; ; try++ {
		// Before the transaction nothing is written (and a cancelled
		// one wrote nothing): a failure here is a refusal, not an
		// unknown outcome.
		st, err := s.StageGet(ctx, p.Ref.Job, p.Ref.Stage)
		if err != nil {
			return 0, fmt.Errorf("split task %s: %w: %w", p.Ref, err, ErrSplitRefused)
		}
		switch {
		case st.State != sm.StageRunning || !st.Materialized:
			return 0, fmt.Errorf("split task %s: stage is %s (materialized %v): %w", p.Ref, st.State, st.Materialized, ErrSplitRefused)
		case st.Total+len(p.Give) > p.MaxTotal:
			return 0, fmt.Errorf("split task %s: the stage has %d tasks, the most it may have is %d: %w", p.Ref, st.Total, p.MaxTotal, ErrSplitRefused)
		}
		items, err := s.splitItems(p, st, head)
		if err != nil {
			return 0, fmt.Errorf("%w: %w", err, ErrSplitRefused)
		}
		err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			return st.Total, nil
		}
		reasons := cancelReasons(err)
		switch {
		case len(reasons) > 0 && reasons[0] == reasonCondFailed:
			// A retry (the SDK's, after a lost response) of a split that
			// applied finds the range already moved: recognise our own.
			if mine, rerr := s.splitApplied(ctx, p, st.Total); rerr != nil || mine {
				return st.Total, rerr
			}
			return 0, fmt.Errorf("split task %s: the holder's claim or range changed: %w", p.Ref, ErrSplitRefused)
		case len(reasons) > 1 && reasons[1] == reasonCondFailed && try+1 < splitTries:
			continue // another split moved the count: number after it
		case head.Quota && len(reasons) > 0 && reasons[len(reasons)-1] == reasonCondFailed:
			return 0, fmt.Errorf("split task %s: %d more tasks would pass your tasks quota of %d: %w: %w",
				p.Ref, len(p.Give), p.MaxQuotaTasks, ErrQuotaReached, ErrSplitRefused)
		case head.Quota && len(reasons) > 1 && reasons[len(reasons)-2] == reasonCondFailed:
			return 0, fmt.Errorf("split task %s: %w: %w", p.Ref, domain.ErrJobNotRunning, ErrSplitRefused)
		case len(reasons) > 0 && reasons[len(reasons)-1] == reasonCondFailed:
			return 0, fmt.Errorf("split task %s: %w: %w", p.Ref, domain.ErrJobNotRunning, ErrSplitRefused)
		case reasons != nil:
			return 0, fmt.Errorf("split task %s: cancelled %v: %w", p.Ref, reasons, ErrSplitRefused)
		}
		return 0, fmt.Errorf("split task %s: %w", p.Ref, err)
	}
}

// splitApplied reports whether this very split applied: the holder's
// record, read consistently, ends at p.At under p.Token, and the task
// numbered first (the stage's total when the transaction was built) is
// p.Give's first piece. Only this holder moves its end.
func (s *Store) splitApplied(ctx context.Context, p SplitTaskParams, first int) (bool, error) {
	t, err := s.TaskGet(ctx, p.Ref)
	if err != nil {
		return false, fmt.Errorf("split task %s: read back: %w", p.Ref, err)
	}
	if t.Token != p.Token || t.Input == nil || t.Input.Start != p.Input.Start || t.Input.End != p.At {
		return false, nil
	}
	// The same cut made by an earlier call (a repeated offer) numbered
	// its tasks from another total: not this call's split.
	n, err := s.TaskGet(ctx, domain.TaskRef{Job: p.Ref.Job, Stage: p.Ref.Stage, Partition: first})
	if errors.Is(err, domain.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("split task %s: read back: %w", p.Ref, err)
	}
	return n.Input != nil && *n.Input == p.Give[0], nil
}

// splitItems is the split's transaction: the giver, the stage, the
// counters the new tasks count down, the new tasks, the timeline entry
// and the job check, in that order (SplitTask reads cancellation reasons
// by position).
func (s *Store) splitItems(p SplitTaskParams, st domain.Stage, head jobHeader) ([]types.TransactWriteItem, error) {
	n := len(p.Give)
	if st.Shards < 1 {
		return nil, fmt.Errorf("split task %s: the stage has no counters", p.Ref)
	}
	c := newCond()
	expr := transition(c, sm.Tasks.Transition(sm.TaskSplit))
	c.values[":tok"] = sv(p.Token)
	c.values[":start"] = nv(p.Input.Start)
	c.values[":end"] = nv(p.Input.End)
	c.values[":at"] = nv(p.At)
	c.values[":now"] = ms(p.Now)
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(taskPK(p.Ref), taskSK(p.Ref.Partition)),
		ConditionExpression:       aws.String(expr + " AND #is = :start AND #ie = :end"),
		UpdateExpression:          aws.String("SET #ie = :at, upd = :now"),
		ExpressionAttributeNames:  map[string]string{"#st": aState, "#is": aInStart, "#ie": aInEnd},
		ExpressionAttributeValues: c.values,
	}}, {Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(p.Ref.Job), stageSK(p.Ref.Stage)),
		ConditionExpression:      aws.String("#st = :run AND mat = :t AND tot = :tot"),
		UpdateExpression:         aws.String("SET tot = :ntot, #enq = :ntot"),
		ExpressionAttributeNames: map[string]string{"#st": aState, "#enq": aEnqueued},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":run": sv(string(sm.StageRunning)), ":t": bv(true), ":tot": nv(int64(st.Total)), ":ntot": nv(int64(st.Total + n)),
		},
	}}}
	perShard := map[int]int64{}
	for k := range n {
		perShard[ShardOf(st.Total+k, st.Shards)]++
	}
	for shard := range st.Shards {
		if perShard[shard] == 0 {
			continue
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &s.table, Key: key(shardPK(p.Ref.Job, p.Ref.Stage, shard), cntSK),
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			UpdateExpression:          aws.String("ADD #left :k, #tot :k"),
			ExpressionAttributeNames:  map[string]string{"#left": aLeft, "#tot": aTotal},
			ExpressionAttributeValues: map[string]types.AttributeValue{":k": nv(perShard[shard])},
		}})
	}
	for k, piece := range p.Give {
		t := domain.Task{
			Ref:   domain.TaskRef{Job: p.Ref.Job, Stage: p.Ref.Stage, Partition: st.Total + k},
			State: sm.TaskReady, MaxAttempts: p.MaxAttempts, Updated: p.Now, Input: &piece,
		}
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.table, Item: encodeTask(t, p.Due), ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	msg := ""
	if p.Message != nil {
		msg = p.Message(st.Total, st.Total+n-1)
	}
	ref := p.Ref
	items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: map[string]types.AttributeValue{
		attrPK: sv(eventPK(ref.Job, ref.Partition%EventShards)),
		attrSK: sv(EventKey(p.Now, EventClassTask, taskEventRest(ref, p.Attempt)+"#split")),
		aKind:  sv(string(SplitKind)), aAt: ms(p.Now), aErr: sv(msg),
		aStageIdx: nv(int64(ref.Stage)), aPart: nv(int64(ref.Partition)), aAttempt: nv(int64(p.Attempt)),
	}}})
	if head.Quota {
		// The job check charges the new tasks too, and the owner's
		// counter comes last (quotacharge.go).
		items = append(items, jobQuotaAdd(s.table, p.Ref.Job, n), quotaUpdate(s.table, head.Owner, quotaTasks, n, p.MaxQuotaTasks))
	} else {
		items = append(items, jobRunningCheck(s.table, p.Ref.Job))
	}
	if len(items) > MaxTxItems {
		return nil, fmt.Errorf("split task %s into %d pieces: %d transaction items, more than %d", p.Ref, n, len(items), MaxTxItems)
	}
	return items, nil
}
