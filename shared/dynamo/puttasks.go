package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/batch"
)

// MaxTxItems is DynamoDB's limit on the items of one transaction.
const MaxTxItems = 100

// PutTasks creates task records that do not exist yet: a chunk of up to
// MaxTxItems-1 tasks is one TransactWriteItems of conditional puts
// (attribute_not_exists), so a materialization costs one request per 99
// tasks instead of one per task. The condition is per item, as before: a
// task that a retried or overlapping materialization (the sweep repeats
// one that looks stalled) finds already written, claimed or committed is
// never reset. Such a chunk's transaction is cancelled whole, and the
// chunk falls back to one conditional put per task, which skips the tasks
// that exist and writes the others: that happens only to chunks a
// materializer died or stalled in, so a job pays it for a chunk or two.
//
// The tasks are not in the sweep index: the chunk's one ready marker,
// due at due, stands in for them (ready.go), and is the transaction's
// last item. A single task, or tasks of several stages, go in the index
// themselves, as a marker would save nothing.
//
// Why not BatchWriteItem: it cannot carry a condition, and a stale
// materializer's unconditional write landing after a newer one's tasks
// were claimed would reset them. The price of the transaction: 2 write
// units per task record instead of 1.
func (s *Store) PutTasks(ctx context.Context, tasks []batch.Task, due time.Time) error {
	for lo := 0; lo < len(tasks); lo += MaxTxItems - 1 {
		chunk := tasks[lo:min(lo+MaxTxItems-1, len(tasks))]
		if err := s.putTaskChunk(ctx, chunk, due); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) putTaskChunk(ctx context.Context, tasks []batch.Task, due time.Time) error {
	marker := readyMarkerFor(tasks, due)
	if marker == nil {
		return s.putTaskChunkIndexed(ctx, tasks, due)
	}
	items := make([]types.TransactWriteItem, 0, len(tasks)+1)
	for _, t := range tasks {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.table, Item: encodeTask(t, time.Time{}),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	// Unconditional: a repeated chunk writes it again, later, for the
	// tasks it adds.
	items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: marker}})
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	if !anyCondFailed(cancelReasons(err)) {
		return fmt.Errorf("put tasks %s..%s: %w", tasks[0].Ref, tasks[len(tasks)-1].Ref, err)
	}
	// Some of these tasks exist: the marker first, then each task that
	// does not exist. A crash in between leaves a marker with tasks
	// missing, which expands to fewer tasks; the repeated chunk writes it
	// again.
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: marker}); err != nil {
		return fmt.Errorf("put ready marker of tasks %s..%s: %w", tasks[0].Ref, tasks[len(tasks)-1].Ref, err)
	}
	return s.putTasksEach(ctx, tasks, time.Time{})
}

// readyMarkerFor is the ready marker of a chunk of tasks of one stage, due
// at due; nil when the tasks should go in the index themselves: a single
// task, tasks of several stages, or no due time (tests).
func readyMarkerFor(tasks []batch.Task, due time.Time) map[string]types.AttributeValue {
	if len(tasks) < 2 || due.IsZero() {
		return nil
	}
	lo, hi := tasks[0].Ref.Partition, tasks[0].Ref.Partition+1
	for _, t := range tasks[1:] {
		if t.Ref.Job != tasks[0].Ref.Job || t.Ref.Stage != tasks[0].Ref.Stage {
			return nil
		}
		lo, hi = min(lo, t.Ref.Partition), max(hi, t.Ref.Partition+1)
	}
	return readyMarkerItem(tasks[0].Ref.Job, tasks[0].Ref.Stage, lo, hi, due)
}

// putTaskChunkIndexed writes tasks each with its own sweep index entry.
func (s *Store) putTaskChunkIndexed(ctx context.Context, tasks []batch.Task, due time.Time) error {
	if len(tasks) == 1 {
		return s.putTasksEach(ctx, tasks, due)
	}
	items := make([]types.TransactWriteItem, len(tasks))
	for i, t := range tasks {
		items[i] = types.TransactWriteItem{Put: &types.Put{
			TableName: &s.table, Item: encodeTask(t, due),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}}
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	if !anyCondFailed(cancelReasons(err)) {
		return fmt.Errorf("put tasks %s..%s: %w", tasks[0].Ref, tasks[len(tasks)-1].Ref, err)
	}
	// Some of these tasks exist: put each that does not.
	return s.putTasksEach(ctx, tasks, due)
}

func anyCondFailed(reasons []string) bool {
	for _, r := range reasons {
		if r == reasonCondFailed {
			return true
		}
	}
	return false
}
