package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batch"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Ready markers keep newly materialized tasks out of the sweep index.
//
// The sweep must find a READY task whose message was lost. Each task
// used to enter the index when it was written, and its claim then moved
// the entry (a delete and a put in the index), so every task paid three
// index writes before its commit took it out: the index's largest cost,
// and what made its shards hot at 10,000 tasks a second.
//
// Now a materialization chunk writes its tasks without index entries and
// one marker item in the index in their place, in the same transaction:
//
//	RDY#<job>#<stage>#<bucket>   <first partition>#<end partition>
//
// (bucket: TaskBucket of the first partition, so a job's markers are found
// without reading, like its tasks). A claim puts its task in the index
// (one index write), and the commit takes it out, as before. When the
// marker falls due (the tasks' StuckAfter), DueItems expands it: it reads
// the chunk's tasks and puts each one still READY and not in the index
// into the index (due ExpandedRecheck later, in case this sweep run does
// not get to it), returns those as due tasks, and takes the marker out of
// the index. From there the sweep handles
// them exactly as it handled tasks written into the index (sweepTask:
// resend, back off, cancel when the job ended). A chunk whose tasks were
// all claimed in time costs its marker's write, one read of the chunk and
// one more write.
const readyPrefix = "RDY#"

// ExpandedRecheck is when a task that an expanded marker returned is due
// again in its own index entry: a sweep run that handles it moves that on
// (a resend backs it off); one that stops first leaves it due soon. Not
// due at once, so that the same run, reading the task's own shard later,
// does not handle it twice.
const ExpandedRecheck = time.Minute

func readyPK(job string, stage, bucket int) string {
	return readyPrefix + job + "#" + strconv.Itoa(stage) + "#" + strconv.Itoa(bucket)
}

func readySK(lo, hi int) string { return fmt.Sprintf("%06d#%06d", lo, hi) }

// readyMarkerItem is the marker of tasks lo..hi-1 of one stage, due at due.
func readyMarkerItem(job string, stage, lo, hi int, due time.Time) map[string]types.AttributeValue {
	pk, sk := readyPK(job, stage, lo/TaskBucket), readySK(lo, hi)
	return map[string]types.AttributeValue{
		attrPK: sv(pk), attrSK: sv(sk), attrGPK: sv(duePK(pk + sk)), attrDue: ms(due),
	}
}

// readyMarker is a marker as the index shows it.
type readyMarker struct {
	job       string
	stage     int
	lo, hi    int
	key       map[string]types.AttributeValue
	due       types.AttributeValue // as indexed: its removal is conditional on it
	pk, sk    string
	malformed bool
}

// parseReadyMarker says whether an index item is a ready marker.
func parseReadyMarker(it map[string]types.AttributeValue) (readyMarker, bool) {
	pk, sk := getS(it, attrPK), getS(it, attrSK)
	if !strings.HasPrefix(pk, readyPrefix) {
		return readyMarker{}, false
	}
	m := readyMarker{pk: pk, sk: sk, key: key(pk, sk), due: it[attrDue]}
	parts := strings.Split(strings.TrimPrefix(pk, readyPrefix), "#")
	bounds := strings.Split(sk, "#")
	var err1, err2, err3 error
	if len(parts) == 3 && len(bounds) == 2 {
		m.job = parts[0]
		m.stage, err1 = strconv.Atoi(parts[1])
		m.lo, err2 = strconv.Atoi(bounds[0])
		m.hi, err3 = strconv.Atoi(bounds[1])
	}
	m.malformed = m.job == "" || err1 != nil || err2 != nil || err3 != nil || m.hi < m.lo
	return m, true
}

// expandReady adds to items the tasks behind each due marker that still
// wait unclaimed, each put in the index on the way (see above), and takes
// the markers it has expanded out of the index. It stops expanding once
// items holds limit records; the markers left are due at the next run.
func (s *Store) expandReady(ctx context.Context, now time.Time, items []DueItem, markers []readyMarker, limit int) ([]DueItem, error) {
	for _, m := range markers {
		if len(items) >= limit {
			break
		}
		if m.malformed {
			return nil, fmt.Errorf("unexpected key %q/%q in the sweep index", m.pk, m.sk)
		}
		waiting, err := s.readyWaiting(ctx, m)
		if err != nil {
			return nil, err
		}
		for _, t := range waiting {
			if err := s.indexWaiting(ctx, t.Ref, now.Add(ExpandedRecheck)); err != nil {
				return nil, err
			}
			items = append(items, DueItem{Kind: DueTask, Job: t.Ref.Job, Stage: t.Ref.Stage, Task: t.Ref})
		}
		// The marker leaves the index (the item stays, a few bytes, until
		// the job's records are deleted: jobdelete.go). Conditional on the
		// due time read: a materialization that has written the marker
		// again since (a repeated chunk) set a later one, and its tasks
		// are not all in this read.
		_, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: &s.table, Key: m.key,
			UpdateExpression:          aws.String("REMOVE gpk, due"),
			ConditionExpression:       aws.String("due = :due"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":due": m.due},
		})
		if err != nil && !isCondFailed(err) {
			return nil, fmt.Errorf("take ready marker %s/%s out of the sweep index: %w", m.pk, m.sk, err)
		}
	}
	return items, nil
}

// readyWaiting reads a marker's tasks, consistently, and returns those
// still READY that are in no index entry of their own: never claimed (a
// retried task is always in the index).
func (s *Store) readyWaiting(ctx context.Context, m readyMarker) ([]batch.Task, error) {
	var waiting []batch.Task
	if m.hi <= m.lo {
		return nil, nil
	}
	for b := m.lo / TaskBucket; b <= (m.hi-1)/TaskBucket; b++ {
		var start map[string]types.AttributeValue
		for {
			out, err := s.db.Query(ctx, &dynamodb.QueryInput{
				TableName:              &s.table,
				KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
				ExpressionAttributeValues: map[string]types.AttributeValue{
					":pk": sv(taskBucketPK(m.job, m.stage, b)), ":lo": sv(taskSK(m.lo)), ":hi": sv(taskSK(m.hi - 1)),
				},
				ConsistentRead:    aws.Bool(true),
				ExclusiveStartKey: start,
			})
			if err != nil {
				return nil, fmt.Errorf("read tasks of ready marker %s/%s: %w", m.pk, m.sk, err)
			}
			for _, it := range out.Items {
				p, err := strconv.Atoi(getS(it, attrSK))
				if err != nil {
					return nil, fmt.Errorf("task key %q/%q is malformed", getS(it, attrPK), getS(it, attrSK))
				}
				t := decodeTask(batch.TaskRef{Job: m.job, Stage: m.stage, Partition: p}, it)
				if t.State == sm.TaskReady && getS(it, attrGPK) == "" {
					waiting = append(waiting, t)
				}
			}
			if start = out.LastEvaluatedKey; start == nil {
				break
			}
		}
	}
	return waiting, nil
}

// indexWaiting puts a waiting task in the index at due, unless it has
// moved on (claimed, or in the index already) since it was read.
func (s *Store) indexWaiting(ctx context.Context, ref batch.TaskRef, due time.Time) error {
	pk, sk := taskPK(ref), taskSK(ref.Partition)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(pk, sk),
		UpdateExpression:         aws.String("SET gpk = :gpk, due = :due"),
		ConditionExpression:      aws.String("#st = :ready AND attribute_not_exists(gpk)"),
		ExpressionAttributeNames: map[string]string{"#st": aState},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":gpk": sv(duePK(pk + sk)), ":due": ms(due), ":ready": sv(string(sm.TaskReady)),
		},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("put waiting task %s in the sweep index: %w", ref, err)
	}
	return nil
}
