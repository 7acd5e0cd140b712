package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A large stage's materialization in segments (domain.Stage.SegmentTasks):
// the segment size and each segment's count live on the stage record, a
// map of small numbers (a million tasks in segments of 10,000 is 99
// entries, about 1 KB), so every reader of the stage (the ready markers'
// looks, task listings, cancels, redrives) knows exactly which tasks were
// sent without another read. Each chunk's count is one UpdateItem on the
// stage record, as with one chain: at 10,000 tasks a second that is 100
// writes a second on the job's key, a tenth of a partition's limit.
const (
	aSegTasks = "sgs" // the segment size, set once
	aSegments = "sgq" // segment (from 1) -> the partition its chain reached
)

// StageSetSegments splits a planned stage's materialization into
// segments of size tasks, once: the first caller's size stays, and every
// caller gets the stage as stored. Each segment's count starts at its
// first partition, or at the stage's count if one chain had already sent
// past it (a stage part way when split): segment k starts at
// clamp(Enqueued, k*size, its end), so nothing sent is sent again. The
// write holds only while the stage's count is the one read; a chain that
// moved it meanwhile makes it read and try again.
func (s *Store) StageSetSegments(ctx context.Context, job string, idx, size int) (domain.Stage, error) {
	for range 5 {
		st, err := s.StageGet(ctx, job, idx)
		if err != nil || st.SegmentTasks > 0 || size <= 0 || st.Total <= size {
			return st, err
		}
		counts := map[string]types.AttributeValue{}
		for k := 1; k*size < st.Total; k++ {
			counts[strconv.Itoa(k)] = nv(int64(domain.SegmentStart(st.Enqueued, st.Total, k, size)))
		}
		cond := "attribute_exists(pk) AND tot = :tot AND attribute_not_exists(" + aSegTasks + ") AND "
		if st.Enqueued == 0 {
			cond += "(attribute_not_exists(" + aEnqueued + ") OR " + aEnqueued + " = :enq)"
		} else {
			cond += aEnqueued + " = :enq"
		}
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
			UpdateExpression:    aws.String("SET " + aSegTasks + " = :n, " + aSegments + " = :m"),
			ConditionExpression: aws.String(cond),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":n": nv(int64(size)), ":m": &types.AttributeValueMemberM{Value: counts},
				":tot": nv(int64(st.Total)), ":enq": nv(int64(st.Enqueued)),
			},
		})
		if err == nil {
			break
		}
		if !isCondFailed(err) {
			return domain.Stage{}, fmt.Errorf("segment stage %s/%d: %w", job, idx, err)
		}
		// Split by another caller (its stage is read back below), or the
		// count moved: read and try again.
	}
	return s.StageGet(ctx, job, idx)
}

// StageAdvanceSegment is StageAdvanceEnqueued for segment seg of a
// stage split into segments (segment 0 is the stage's own count): it
// moves the segment's count from from to to, if it still stands at from
// and the stage is RUNNING, and says whether it did. A stale from (a
// concurrent chain got there first) or an ended stage is not an error:
// the caller reads the stage again.
func (s *Store) StageAdvanceSegment(ctx context.Context, job string, idx, seg, from, to int, due time.Time) (bool, error) {
	if seg == 0 {
		return s.StageAdvanceEnqueued(ctx, job, idx, from, to, due)
	}
	c := newCond()
	c.values[":from"] = nv(int64(from))
	c.values[":to"] = nv(int64(to))
	c.values[":run"] = sv(string(sm.StageRunning))
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:          aws.String("SET #sg.#k = :to" + s.dueClause(c, jobPK(job)+stageSK(idx), due)),
		ConditionExpression:       aws.String("#st = :run AND #sg.#k = :from"),
		ExpressionAttributeNames:  map[string]string{"#st": aState, "#sg": aSegments, "#k": strconv.Itoa(seg)},
		ExpressionAttributeValues: c.values,
	})
	if isCondFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("advance segment %d of stage %s/%d to %d enqueued: %w", seg, job, idx, to, err)
	}
	return true, nil
}

// decodeSegments fills in a stage's segments from its record.
func decodeSegments(st *domain.Stage, it map[string]types.AttributeValue) {
	st.SegmentTasks = int(getN(it, aSegTasks))
	if st.SegmentTasks > 0 && st.Materialized {
		// Its enq counted segment 0 only: a materialized stage has sent
		// all its tasks, which readers of Enqueued expect.
		st.Enqueued = max(st.Enqueued, st.Total)
	}
	m, ok := it[aSegments].(*types.AttributeValueMemberM)
	if !ok {
		return
	}
	st.Segments = make(map[int]int, len(m.Value))
	for k, v := range m.Value {
		n, ok := v.(*types.AttributeValueMemberN)
		if !ok {
			continue
		}
		seg, err1 := strconv.Atoi(k)
		at, err2 := strconv.Atoi(n.Value)
		if err1 == nil && err2 == nil {
			st.Segments[seg] = at
		}
	}
}

// WithUnwrittenOf is WithUnwritten for a stage as read: its unwritten
// tasks are the partitions its chains have sent (domain.Stage.Sent) with
// no record, in whichever segment.
func WithUnwrittenOf(tasks []domain.Task, st domain.Stage, maxAttempts int) []domain.Task {
	have := make(map[int]bool, len(tasks))
	for _, t := range tasks {
		have[t.Ref.Partition] = true
	}
	out := slices.Clone(tasks)
	for p := range st.Total {
		if !have[p] && st.Sent(p) {
			out = append(out, unwrittenTask(domain.TaskRef{Job: st.Job, Stage: st.Index, Partition: p}, maxAttempts))
		}
	}
	slices.SortFunc(out, func(a, b domain.Task) int { return a.Ref.Partition - b.Ref.Partition })
	return out
}
