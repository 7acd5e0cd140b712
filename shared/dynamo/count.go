package dynamo

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Counting a commit.
//
// A commit is two single-item writes, not one transaction: the task's
// guarded transition (the fence, 1 WRU), then its count on its stage's
// counter shard (1 WRU while the shard is under 1 KB). A transaction of
// the two cost 4 write units, 2 per item. The shard keeps the set of the
// partitions it counted (done), and the count is conditional on the
// partition not being in it, so a retry after a lost answer, a duplicate
// commit or the sweep's recovery never counts a task twice. The record
// counts, the duration histogram and a copy's win ride on the same
// conditional write, so they are exact too. A stage still completes only
// when all its tasks have committed: a count follows its task's commit,
// and the stage completes when its counters are at zero.
//
// A committer that dies between the two writes leaves its task SUCCEEDED
// and uncounted, and the stage waiting. Three things find it:
//   - its message, which executors delete only after the count: it comes
//     back, and the claim it makes, refused with ErrCommitted, counts it;
//   - its chunk's ready marker, which stays in the index until every task
//     of the chunk has finished: its last look reads the counter sets of
//     the chunk's committed tasks and puts each uncounted one in the index
//     for the sweep to count (ready.go, EnsureCounted);
//   - its own index entry, when it got one after its claim (a marker's
//     look found its lease lapsed): the split commit leaves the entry, due
//     CountGrace later, and the sweep counts the task before removing it.
//
// A crash therefore delays a stage by one look at most. Only a split
// commit can leave a task uncounted: it leaves the task a due time, and
// the recovery looks only at committed tasks that have one, so a commit
// counted in its transaction (below, or by an earlier release) is never
// counted again.
//
// Commits still made in one transaction with their count: a task the
// sweep watches on its own (a stage's only task, a retry: its entry goes
// in the same write, where a split commit would leave it for the sweep to
// visit), and a commit that adds rejected records, with the stage's
// bad-record count, whose guard must refuse the commit itself
// (badrecords.go).
const aDone = "done"

// ErrCommitted is a claim's refusal of a task that committed (with
// domain.ErrAlreadyDone): its message came back, perhaps because its
// committer died before it deleted it, and perhaps before it counted it.
var ErrCommitted = errors.New("task committed")

// CountGrace is when a committed task that has its own index entry is
// due for the sweep's check that it was counted: its committer counts it
// within milliseconds unless it died.
const CountGrace = time.Minute

// countCommit counts a committed task on its counter shard, once, and
// reports whether the shard is at zero after it.
func (s *Store) countCommit(ctx context.Context, p CommitParams) (shardDone bool, err error) {
	return s.countBatch(ctx, shardOfTask(p), []CommitParams{p})
}

func shardOfTask(p CommitParams) ShardRef {
	return ShardRef{p.Ref.Job, p.Ref.Stage, ShardOf(p.Ref.Partition, p.Shards)}
}

// countUpdate is the counter shard's update for the commits ps, all of
// one shard, binding its values in vals: the count down, the partitions
// added to the counted set, the record counts, the duration histogram and
// the copies' wins. The commit transaction and the counts share it.
func countUpdate(ps []CommitParams, vals map[string]types.AttributeValue) string {
	set := make([]string, len(ps))
	var rin, rout, won int64
	var spent cost.Counts
	hist := map[string]int64{}
	for i, p := range ps {
		spent.Add(p.Cost)
		set[i] = strconv.Itoa(p.Ref.Partition)
		rin += p.RecordsIn
		rout += p.RecordsOut
		if p.Duration > 0 {
			hist[durationAttr(domain.DurationBucket(p.Duration))]++
		}
		if p.Copy {
			won++
		}
	}
	vals[":minus"], vals[":rin"], vals[":rout"] = nv(-int64(len(ps))), nv(rin), nv(rout)
	vals[":ps"] = &types.AttributeValueMemberNS{Value: set}
	upd := "ADD #left :minus, #rin :rin, #rout :rout, #done :ps"
	for i, a := range slices.Sorted(maps.Keys(hist)) {
		v := fmt.Sprintf(":h%d", i)
		vals[v] = nv(hist[a])
		upd += ", " + a + " " + v
	}
	if won > 0 {
		vals[":xw"] = nv(won)
		upd += ", " + aCopiesWon + " :xw"
	}
	return costUpdate(upd, spent, vals) // cost.go
}

// countNames are countUpdate's attribute names.
var countNames = map[string]string{"#left": aLeft, "#rin": aRecIn, "#rout": aRecOut, "#done": aDone}

// shardCounted reads whether a task's counter shard has counted it, and
// the shard's count left.
func (s *Store) shardCounted(ctx context.Context, ref domain.TaskRef, shards int) (counted bool, left int, err error) {
	shard := ShardOf(ref.Partition, shards)
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(shardPK(ref.Job, ref.Stage, shard), cntSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#left, #done"),
		ExpressionAttributeNames: map[string]string{"#left": aLeft, "#done": aDone},
	})
	if err != nil {
		return false, 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, ref.Job, ref.Stage, err)
	}
	if out.Item == nil {
		return false, 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, ref.Job, ref.Stage, domain.ErrNotFound)
	}
	return inNumberSet(out.Item[aDone], ref.Partition), int(getN(out.Item, aLeft)), nil
}

// batchUncounted reads counter k (consistently) and returns those of ps
// it has not counted, and what it has left; ok is false when it cannot be
// read.
func (s *Store) batchUncounted(ctx context.Context, k ShardRef, ps []CommitParams) (rest []CommitParams, left int, ok bool) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(shardPK(k.Job, k.Stage, k.Shard), cntSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#left, #done"),
		ExpressionAttributeNames: map[string]string{"#left": aLeft, "#done": aDone},
	})
	if err != nil || out.Item == nil {
		return nil, 0, false
	}
	for _, p := range ps {
		if !inNumberSet(out.Item[aDone], p.Ref.Partition) {
			rest = append(rest, p)
		}
	}
	return rest, int(getN(out.Item, aLeft)), true
}

func inNumberSet(v types.AttributeValue, n int) bool {
	set, ok := v.(*types.AttributeValueMemberNS)
	if !ok {
		return false
	}
	for _, m := range set.Value {
		if k, err := strconv.Atoi(m); err == nil && k == n {
			return true
		}
	}
	return false
}

// EnsureCounted counts a SUCCEEDED task that its committer may not have
// counted (it died between its commit and its count). counted says that
// this call counted it, and shardDone that its shard is at zero: the
// stage's follow-up is the caller's. That is so for a task counted before
// too, since its committer may have died between its count and the
// follow-up; the follow-up's steps are idempotent. A task not SUCCEEDED is
// left alone.
func (s *Store) ShardEnsureCounted(ctx context.Context, ref domain.TaskRef, shards int) (counted, shardDone bool, err error) {
	have, left, err := s.shardCounted(ctx, ref, shards)
	if errors.Is(err, domain.ErrNotFound) {
		return false, false, nil // the job's records are being deleted
	}
	if err != nil {
		return false, false, err
	}
	if have {
		return false, left <= 0, nil
	}
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(taskPK(ref), taskSK(ref.Partition)), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, false, fmt.Errorf("get task %s: %w", ref, err)
	}
	if out.Item == nil || sm.TaskState(getS(out.Item, aState)) != sm.TaskSucceeded || out.Item[attrDue] == nil {
		// Not committed; or committed in a transaction with its count (a
		// watched task, bad records, or a release before split commits),
		// which leaves no due time: counting it here would count it twice.
		return false, false, nil
	}
	p := CommitParams{
		HolderParams: HolderParams{Ref: ref}, Shards: shards,
		RecordsIn: getN(out.Item, aRecIn), RecordsOut: getN(out.Item, aRecOut),
	}
	if claimed, done := getT(out.Item, aClaimed), getT(out.Item, aUpdated); !claimed.IsZero() && done.After(claimed) {
		p.Duration = done.Sub(claimed)
	}
	// A copy's win is not known any more (the commit removed the copy's
	// fields): the stage's count of won copies misses it.
	shardDone, err = s.countCommit(ctx, p)
	return err == nil, shardDone, err
}

// uncounted returns the partitions among committed (SUCCEEDED tasks of
// stage st, nil when it is gone) that their counter shards have not
// counted: one consistent read of each shard they fall on.
func (s *Store) uncounted(ctx context.Context, st *domain.Stage, committed []int) ([]int, error) {
	if len(committed) == 0 || st == nil {
		return nil, nil // nothing, or the job's records are being deleted
	}
	job, stage := st.Job, st.Index
	if st.Shards < 1 {
		return nil, fmt.Errorf("stage %s/%d has no counters", job, stage)
	}
	seen := map[int]bool{}
	var keys []map[string]types.AttributeValue
	for _, p := range committed {
		if sh := ShardOf(p, st.Shards); !seen[sh] {
			seen[sh] = true
			keys = append(keys, key(shardPK(job, stage, sh), cntSK))
		}
	}
	sets := map[string]types.AttributeValue{}
	for lo := 0; lo < len(keys); lo += 100 {
		pending := keys[lo:min(lo+100, len(keys))]
		for len(pending) > 0 {
			out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{s.table: {
				Keys: pending, ConsistentRead: aws.Bool(true),
				ProjectionExpression:     aws.String("#pk, #done"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#done": aDone},
			}}})
			if err != nil {
				return nil, fmt.Errorf("read counters of stage %s/%d: %w", job, stage, err)
			}
			for _, it := range out.Responses[s.table] {
				sets[getS(it, attrPK)] = it[aDone]
				if sets[getS(it, attrPK)] == nil {
					sets[getS(it, attrPK)] = &types.AttributeValueMemberNS{} // nothing counted yet
				}
			}
			pending = out.UnprocessedKeys[s.table].Keys
		}
	}
	var left []int
	for _, p := range committed {
		// A missing counter counts nothing: the job's records are being
		// deleted (counters are written before their stage's tasks).
		if set, ok := sets[shardPK(job, stage, ShardOf(p, st.Shards))]; ok && !inNumberSet(set, p) {
			left = append(left, p)
		}
	}
	return left, nil
}

// maxCountBatch bounds the partitions one count write adds: each adds a
// condition to the write (its expression stays far below DynamoDB's 4 KB).
const maxCountBatch = 50

// ShardRef names one completion counter.
type ShardRef struct {
	Job          string
	Stage, Shard int
}

// CountCommits counts committed tasks (CommitTask with DeferCount), one
// write per counter for the tasks that share it, and returns the counters
// it found at zero after its writes: their stages' follow-up is the
// caller's. A write that some of its tasks were already counted refuses
// (a retry of a lost answer, the sweep's recovery) is done again a task at
// a time, each idempotent. On an error, the tasks it did not count are
// the sweep's to count (count.go's recovery).
func (s *Store) ShardCountCommits(ctx context.Context, ps []CommitParams) (zero []ShardRef, err error) {
	groups := map[ShardRef][]CommitParams{}
	var order []ShardRef
	for _, p := range ps {
		k := shardOfTask(p)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], p)
	}
	var errs []error
	for _, k := range order {
		g := groups[k]
		for lo := 0; lo < len(g); lo += maxCountBatch {
			done, err := s.countBatch(ctx, k, g[lo:min(lo+maxCountBatch, len(g))])
			if err != nil {
				errs = append(errs, err)
				continue
			}
			if done {
				zero = append(zero, k)
			}
		}
	}
	return slices.Compact(zero), errors.Join(errs...)
}

// countBatch counts tasks of one counter in one conditional write.
func (s *Store) countBatch(ctx context.Context, k ShardRef, ps []CommitParams) (shardDone bool, err error) {
	vals := map[string]types.AttributeValue{}
	conds := []string{"attribute_exists(pk)"}
	for i, p := range ps {
		v := fmt.Sprintf(":p%d", i)
		vals[v] = nv(int64(p.Ref.Partition))
		conds = append(conds, "NOT contains(#done, "+v+")")
	}
	upd := countUpdate(ps, vals)
	if flush := batchCostFlush(ps); flush != "" {
		vals[":cf"] = &types.AttributeValueMemberSS{Value: []string{flush}}
		upd += ", " + aCostFlushes + " :cf" // count_cost.go
	}
	out, err := s.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(shardPK(k.Job, k.Stage, k.Shard), cntSK),
		ConditionExpression:       aws.String(strings.Join(conds, " AND ")),
		UpdateExpression:          aws.String(upd),
		ExpressionAttributeNames:  countNames,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueUpdatedNew,
	})
	if err == nil {
		return getN(out.Attributes, aLeft) == 0, nil
	}
	if !isCondFailed(err) {
		return false, fmt.Errorf("count %d tasks on counter %d of stage %s/%d: %w", len(ps), k.Shard, k.Job, k.Stage, err)
	}
	if len(ps) == 1 {
		// Counted already (a retry whose first answer was lost, or the
		// sweep's recovery), or the counter is missing.
		counted, left, err := s.shardCounted(ctx, ps[0].Ref, ps[0].Shards)
		if err != nil {
			return false, err
		}
		if !counted {
			return false, fmt.Errorf("count task %s on counter %d: refused, and the counter does not hold it", ps[0].Ref, k.Shard)
		}
		s.keepBatchCost(ctx, k, ps)
		return left == 0, nil
	}
	// Some were counted already (a retry whose first answer was lost):
	// one read of the counter finds which, and the rest go in one write
	// again. Only when that finds none counted (the counter is missing)
	// or is refused in turn does each go on its own, idempotently.
	if rest, left, ok := s.batchUncounted(ctx, k, ps); ok && len(rest) < len(ps) {
		if len(rest) == 0 {
			s.keepBatchCost(ctx, k, ps)
			return left == 0, nil
		}
		moveCost(ps, rest) // count_cost.go
		if done, err := s.countBatch(ctx, k, rest); err == nil {
			return done, nil
		}
		ps = rest
	}
	var errs []error
	for _, p := range ps {
		done, err := s.countCommit(ctx, p)
		if err != nil {
			errs = append(errs, err)
		}
		shardDone = shardDone || done
	}
	return shardDone, errors.Join(errs...)
}
