package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Attributes of the records this file adds (see codec.go for the rest).
const (
	aKind     = "k"
	aAt       = "at"
	aStageIdx = "stg"
	aPart     = "prt"
	aFails    = "fl"
	aRecIn    = "rin"
	aRecOut   = "rout"
)

// AttemptEndParams records how an attempt ended without committing.
type AttemptEndParams struct {
	End domain.AttemptEnd
	// Shards is the stage's counter count; the end is counted as a failure
	// on the task's counter shard. Zero skips the count.
	Shards int
}

// RecordAttemptEnd writes an attempt's end twice, by task and by time, and
// counts it as a failure of its stage, in one transaction. The by-task
// record is conditional, so each attempt ends at most once: a repeated or
// racing write changes nothing and reports recorded=false.
func (s *Store) AttemptRecordEnd(ctx context.Context, p AttemptEndParams) (recorded bool, err error) {
	e := p.End
	ref := e.Ref
	common := func(pk, sk string) map[string]types.AttributeValue {
		it := map[string]types.AttributeValue{
			attrPK: sv(pk), attrSK: sv(sk), aKind: sv(string(e.Kind)), aAt: ms(e.At),
			aStageIdx: nv(int64(ref.Stage)), aPart: nv(int64(ref.Partition)), aAttempt: nv(int64(e.Attempt)),
		}
		if e.Err != "" {
			it[aErr] = sv(e.Err)
		}
		if e.Executor != "" {
			it[aExecutor] = sv(e.Executor)
		}
		if !e.Started.IsZero() {
			it[aAttStart] = ms(e.Started)
		}
		return it
	}
	items := []types.TransactWriteItem{{Put: &types.Put{
		TableName: &s.table, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		Item: common(attemptPK(ref.Job, ref.Stage, ref.Partition/TaskBucket), attemptSK(ref.Partition, e.Attempt)),
	}}, {Put: &types.Put{
		TableName: &s.table,
		Item:      common(eventPK(ref.Job, ref.Partition%EventShards), EventKey(e.At, EventClassTask, taskEventRest(ref, e.Attempt))),
	}}}
	if p.Shards > 0 {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &s.table, Key: key(shardPK(ref.Job, ref.Stage, ShardOf(ref.Partition, p.Shards)), cntSK),
			// Never create a counter: a partial one would read as complete.
			ConditionExpression:       aws.String("attribute_exists(pk)"),
			UpdateExpression:          aws.String("ADD #fl :one"),
			ExpressionAttributeNames:  map[string]string{"#fl": aFails},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": nv(1)},
		}})
	}
	// Nothing once the job is marked deleting (jobdelete.go).
	jobCheck := len(items)
	items = append(items, liveJobCheck(s.table, ref.Job))
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return true, nil
	}
	reasons := cancelReasons(err)
	if len(reasons) > jobCheck && reasons[jobCheck] == reasonCondFailed {
		return false, fmt.Errorf("record end of %s attempt %d: job deleted or being deleted: %w", ref, e.Attempt, domain.ErrNotFound)
	}
	if len(reasons) > 0 && reasons[0] == reasonCondFailed {
		return false, nil
	}
	return false, fmt.Errorf("record end of %s attempt %d: %w", ref, e.Attempt, err)
}

func decodeAttemptEnd(job string, it map[string]types.AttributeValue) domain.AttemptEnd {
	return domain.AttemptEnd{
		Ref:     domain.TaskRef{Job: job, Stage: int(getN(it, aStageIdx)), Partition: int(getN(it, aPart))},
		Attempt: int(getN(it, aAttempt)), Kind: domain.AttemptEndKind(getS(it, aKind)),
		At: getT(it, aAt), Err: getS(it, aErr),
		Executor: getS(it, aExecutor), Started: getT(it, aAttStart),
	}
}

// AttemptEnds returns the recorded attempt ends of partitions from..to
// (inclusive) of a stage, by partition then attempt.
func (s *Store) AttemptEnds(ctx context.Context, job string, stage, from, to int) ([]domain.AttemptEnd, error) {
	var ends []domain.AttemptEnd
	for b := from / TaskBucket; b <= to/TaskBucket; b++ {
		in := &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": sv(attemptPK(job, stage, b)), ":lo": sv(attemptSK(from, 0)), ":hi": sv(attemptSK(to, 999)),
			},
			ConsistentRead: aws.Bool(true),
		}
		for {
			out, err := s.db.Query(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("read attempt ends of %s/%d: %w", job, stage, err)
			}
			for _, it := range out.Items {
				ends = append(ends, decodeAttemptEnd(job, it))
			}
			if out.LastEvaluatedKey == nil {
				break
			}
			in.ExclusiveStartKey = out.LastEvaluatedKey
		}
	}
	return ends, nil
}

// TimelineEvent is a stored timeline record and its EventKey.
type TimelineEvent struct {
	Key string
	domain.AttemptEnd
}

// JobEvents returns the job's first limit stored timeline records whose
// key is after after ("" for the start), in key order. It reads each
// shard once: any record among the first limit overall is among the first
// limit of its own shard.
func (s *Store) TimelineEvents(ctx context.Context, job, after string, limit int) ([]TimelineEvent, error) {
	var evs []TimelineEvent
	for k := 0; k < EventShards; k++ {
		in := &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": sv(eventPK(job, k)),
			},
			ConsistentRead: aws.Bool(true),
			Limit:          aws.Int32(int32(limit)),
		}
		if after != "" {
			in.KeyConditionExpression = aws.String("pk = :pk AND sk > :after")
			in.ExpressionAttributeValues[":after"] = sv(after)
		}
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("read timeline of job %s: %w", job, err)
		}
		for _, it := range out.Items {
			evs = append(evs, TimelineEvent{Key: getS(it, attrSK), AttemptEnd: decodeAttemptEnd(job, it)})
		}
	}
	slices.SortFunc(evs, func(a, b TimelineEvent) int { return strings.Compare(a.Key, b.Key) })
	return evs[:min(len(evs), limit)], nil
}

// TaskPageParams selects tasks of one stage in partition order.
type TaskPageParams struct {
	Job   string
	Stage int
	Total int
	// Materialized is how many of the stage's partitions were
	// materialized (its enqueued count): one of them with no record is
	// unwritten (sm.TaskUnwritten), listed READY with MaxAttempts.
	Materialized, MaxAttempts int
	// Sent, when set, says which partitions were materialized in place
	// of Materialized: a stage queued in segments (domain.Stage.Sent).
	Sent func(partition int) bool
	// State, when set, keeps only tasks in that state.
	State sm.TaskState
	// After is the last partition already seen; -1 to start.
	After int
	Limit int
	// MaxReads bounds the Queries this call may take.
	MaxReads int
}

// TaskPage is one page of a stage's tasks.
type TaskPage struct {
	Rows []domain.TaskRow
	// Next is the partition to continue after; Done means the stage has no
	// more tasks to look at.
	Next  int
	Done  bool
	Reads int
}

// ListTaskPage reads a stage's tasks bucket by bucket, consistently,
// evaluating no more task records than the page needs. The state filter
// is applied here rather than in the Query, as unwritten tasks have no
// record to filter.
func (s *Store) TaskListPage(ctx context.Context, p TaskPageParams) (TaskPage, error) {
	pg := TaskPage{Next: p.After}
	for pg.Next+1 < p.Total && len(pg.Rows) < p.Limit && pg.Reads < max(p.MaxReads, 1) {
		b := (pg.Next + 1) / TaskBucket
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk AND sk > :after"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": sv(taskBucketPK(p.Job, p.Stage, b)),
				// taskSK(-1) is "-00001", which sorts before every partition.
				":after": sv(taskSK(pg.Next)),
			},
			ConsistentRead: aws.Bool(true),
			Limit:          aws.Int32(int32(p.Limit - len(pg.Rows))),
		})
		pg.Reads++
		if err != nil {
			return pg, fmt.Errorf("list tasks of stage %s/%d: %w", p.Job, p.Stage, err)
		}
		// The read covers the partitions up to its last record when it
		// stopped at its limit, else to the end of the bucket.
		last := min((b+1)*TaskBucket, p.Total) - 1
		if out.LastEvaluatedKey != nil {
			if last, err = strconv.Atoi(getS(out.LastEvaluatedKey, attrSK)); err != nil {
				return pg, fmt.Errorf("task key %q: %w", getS(out.LastEvaluatedKey, attrSK), err)
			}
		}
		rows := make(map[int]domain.TaskRow, len(out.Items))
		for _, it := range out.Items {
			part, err := strconv.Atoi(getS(it, attrSK))
			if err != nil {
				return pg, fmt.Errorf("task key %q: %w", getS(it, attrSK), err)
			}
			rows[part] = domain.TaskRow{
				Task:      decodeTask(domain.TaskRef{Job: p.Job, Stage: p.Stage, Partition: part}, it),
				RecordsIn: getN(it, aRecIn), RecordsOut: getN(it, aRecOut),
			}
		}
		for part := pg.Next + 1; part <= last && len(pg.Rows) < p.Limit; part++ {
			pg.Next = part
			r, ok := rows[part]
			if !ok && (p.Sent == nil && part < p.Materialized || p.Sent != nil && p.Sent(part)) {
				ref := domain.TaskRef{Job: p.Job, Stage: p.Stage, Partition: part}
				r, ok = domain.TaskRow{Task: unwrittenTask(ref, p.MaxAttempts)}, true
			}
			if ok && (p.State == "" || r.State == p.State) {
				pg.Rows = append(pg.Rows, r)
			}
		}
	}
	pg.Done = pg.Next+1 >= p.Total
	return pg, nil
}

// ---- stage aggregates ----------------------------------------------------

// Rate sample attributes on a stage record.
const (
	aSampleAt  = "smt"
	aSampleN   = "smn"
	aSampleRec = "smr"
	aRateTask  = "emt" // tasks per 1,000 s, so that it is an integer
	aRateRec   = "emr" // records per 1,000 s
)

// StageStats reads a job's stages with one Query and sums each stage's
// counter shards with batch reads: at most 32 counters per stage, however
// many tasks it has.
func (s *Store) StageStats(ctx context.Context, job string) ([]domain.StageStats, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pre)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sv(jobPK(job)), ":pre": sv("STAGE#"),
		},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read stages of job %s: %w", job, err)
	}
	stats := make([]domain.StageStats, 0, len(out.Items))
	var keys []map[string]types.AttributeValue
	for _, it := range out.Items {
		st, err := decodeStage(job, it)
		if err != nil {
			return nil, err
		}
		ss := domain.StageStats{Stage: st}
		if at := getT(it, aSampleAt); !at.IsZero() {
			ss.Sample = &domain.RateSample{At: at, Committed: int(getN(it, aSampleN)), RecordsIn: getN(it, aSampleRec), TaskRate: -1, RecordRate: -1}
			if _, ok := it[aRateTask]; ok {
				ss.Sample.TaskRate = float64(getN(it, aRateTask)) / 1000
				ss.Sample.RecordRate = float64(getN(it, aRateRec)) / 1000
			}
		}
		ss.Counters.Total = st.Total
		for k := 0; k < st.Shards; k++ {
			keys = append(keys, key(shardPK(job, st.Index, k), cntSK))
		}
		stats = append(stats, ss)
	}
	found := map[string]map[string]types.AttributeValue{}
	for lo := 0; lo < len(keys); lo += 100 {
		batchKeys := keys[lo:min(lo+100, len(keys))]
		for len(batchKeys) > 0 {
			res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
				RequestItems: map[string]types.KeysAndAttributes{s.table: {Keys: batchKeys, ConsistentRead: aws.Bool(true)}},
			})
			if err != nil {
				return nil, fmt.Errorf("read counters of job %s: %w", job, err)
			}
			for _, it := range res.Responses[s.table] {
				found[getS(it, attrPK)] = it
			}
			batchKeys = res.UnprocessedKeys[s.table].Keys
		}
	}
	for i := range stats {
		st, c := stats[i].Stage, &stats[i].Counters
		for k := 0; k < st.Shards; k++ {
			it, ok := found[shardPK(job, st.Index, k)]
			if !ok {
				c.Missing++
				continue
			}
			c.Left += int(getN(it, aLeft))
			c.Failures += int(getN(it, aFails))
			c.CopiesWon += int(getN(it, aCopiesWon)) // speculationstats.go
			c.RecordsIn += getN(it, aRecIn)
			c.RecordsOut += getN(it, aRecOut)
			c.Cost.Add(readCost(it)) // cost.go
		}
		// A failure the stage tolerated counted its shard down too.
		c.Committed = st.Total - c.Left - st.Tolerated
		if c.Missing > 0 {
			c.Committed = 0
		}
	}
	return stats, nil
}

// PutRateSample replaces a running stage's rate sample if it is still
// prev (zero: no sample yet). Two readers sampling at once both compute
// from the same prev; one write wins and the other is dropped
// (updated=false), so the average never counts an interval twice.
func (s *Store) StagePutRateSample(ctx context.Context, job string, idx int, prev time.Time, smp domain.RateSample) (updated bool, err error) {
	vals := map[string]types.AttributeValue{
		":t": ms(smp.At), ":n": nv(int64(smp.Committed)), ":r": nv(smp.RecordsIn),
	}
	upd := "SET smt = :t, smn = :n, smr = :r"
	if smp.TaskRate >= 0 {
		vals[":et"] = nv(int64(smp.TaskRate*1000 + 0.5))
		vals[":er"] = nv(int64(max(smp.RecordRate, 0)*1000 + 0.5))
		upd += ", emt = :et, emr = :er"
	}
	cond := "attribute_exists(pk) AND attribute_not_exists(smt)"
	if !prev.IsZero() {
		cond = "smt = :prev"
		vals[":prev"] = ms(prev)
	}
	_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression: aws.String(upd), ConditionExpression: aws.String(cond),
		ExpressionAttributeValues: vals,
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sample rate of stage %s/%d: %w", job, idx, err)
	}
	return true, nil
}
