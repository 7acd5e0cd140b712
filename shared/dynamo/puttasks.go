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
// MaxTxItems tasks is one TransactWriteItems of conditional puts
// (attribute_not_exists), so a materialization costs one request per 100
// tasks instead of one per task. The condition is per item, as before: a
// task that a retried or overlapping materialization (the sweep repeats
// one that looks stalled) finds already written, claimed or committed is
// never reset. Such a chunk's transaction is cancelled whole, and the
// chunk falls back to one conditional put per task, which skips the tasks
// that exist and writes the others: that happens only to chunks a
// materializer died or stalled in, so a job pays it for a chunk or two.
//
// Why not BatchWriteItem: it cannot carry a condition, and a stale
// materializer's unconditional write landing after a newer one's tasks
// were claimed would reset them. The price of the transaction: 2 write
// units per task record instead of 1.
func (s *Store) PutTasks(ctx context.Context, tasks []batch.Task, due time.Time) error {
	for lo := 0; lo < len(tasks); lo += MaxTxItems {
		chunk := tasks[lo:min(lo+MaxTxItems, len(tasks))]
		if err := s.putTaskChunk(ctx, chunk, due); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) putTaskChunk(ctx context.Context, tasks []batch.Task, due time.Time) error {
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
