package dynamo

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// MaxTxItems is DynamoDB's limit on the items of one transaction.
const MaxTxItems = 100

// PutTasks creates task records that do not exist yet, a chunk of up to
// MaxTxItems-1 tasks at a time, so that a stale or repeated
// materialization never resets a task that was claimed or committed (the
// sweep repeats one that looks stalled).
//
// A chunk of one stage's tasks goes in with its ready marker (ready.go),
// which stands in for the tasks in the sweep index: the tasks as PartiQL
// INSERT statements, 25 to a BatchExecuteStatement, then the marker with
// one PutItem (putMarker says why in this order). An INSERT is a conditional put (it fails with
// DuplicateItem when the key exists), so a task found already written is
// left as it is, and each costs 1 write unit: half of a put inside a
// transaction, which is how chunks were written before. BatchWriteItem
// would cost the same but carries no condition, so a stalled
// materializer's late write could reset a claimed task.
//
// A single task, or tasks of several stages, go in the index themselves,
// in one transaction of conditional puts, as a marker would save nothing.
//
// Tasks that carry nothing but their position (a stage partitioned by
// count, or reading a shuffle) are not written at all: one marker stands
// for them (sm.TaskUnwritten). A single one is written as before, with
// its own entry: its marker would save nothing.
func (s *Store) TaskPutMany(ctx context.Context, tasks []domain.Task, due time.Time) error {
	if def, ok := unwrittenChunk(tasks); ok && len(tasks) > 1 && !due.IsZero() {
		if lo, hi, one := stageRange(tasks); one {
			marker := readyMarkerItem(tasks[0].Ref.Job, tasks[0].Ref.Stage, lo, hi, due)
			// Tasks with nothing but their position are not written at
			// all (sm.TaskUnwritten): their claims write them. One
			// marker stands for them, however many (no transaction
			// bounds the chunk), holding what a record would have: the
			// tasks' attempts and time, for the sweep's look.
			marker[aMax] = nv(int64(def.MaxAttempts))
			marker[aMarkAt] = ms(def.Updated)
			return s.putMarker(ctx, tasks, marker)
		}
	}
	for lo := 0; lo < len(tasks); lo += MaxTxItems - 1 {
		chunk := tasks[lo:min(lo+MaxTxItems-1, len(tasks))]
		if err := s.putTaskChunk(ctx, chunk, due); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) putTaskChunk(ctx context.Context, tasks []domain.Task, due time.Time) error {
	marker := readyMarkerFor(tasks, due)
	if marker == nil {
		return s.putTaskChunkIndexed(ctx, tasks, due)
	}
	if s.partiQLOff() {
		return s.putTaskChunkTx(ctx, tasks, marker)
	}
	items := make([]map[string]types.AttributeValue, len(tasks))
	for i, t := range tasks {
		items[i] = encodeTask(t, time.Time{})
	}
	err := s.insertItems(ctx, items)
	if err == nil {
		return s.putMarker(ctx, tasks, marker)
	}
	if ctx.Err() != nil {
		return wrapPut(tasks, err)
	}
	// An endpoint that cannot run PartiQL (some DynamoDB-compatible
	// stores and emulators answer it with an error), or statements that
	// kept failing: the chunk as a transaction of conditional puts, as
	// before PartiQL, which is as safe and costs twice the write units.
	// This store uses transactions for a while, unless PartiQL has
	// worked on it (partiQLFailed).
	s.partiQLFailed()
	return s.putTaskChunkTx(ctx, tasks, marker)
}

func wrapPut(tasks []domain.Task, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("put tasks %s..%s: %w", tasks[0].Ref, tasks[len(tasks)-1].Ref, err)
}

// putTaskChunkTx writes a chunk's tasks and its marker in one transaction
// of conditional puts (the marker's unconditional). Some of the tasks
// existing cancels it whole: then the marker, and each task that does not
// exist, on its own.
func (s *Store) putTaskChunkTx(ctx context.Context, tasks []domain.Task, marker map[string]types.AttributeValue) error {
	items := make([]types.TransactWriteItem, 0, len(tasks)+1)
	for _, t := range tasks {
		items = append(items, types.TransactWriteItem{Put: &types.Put{
			TableName: &s.table, Item: encodeTask(t, time.Time{}),
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		}})
	}
	items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: &s.table, Item: marker}})
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		return nil
	}
	if !anyCondFailed(cancelReasons(err)) {
		return wrapPut(tasks, err)
	}
	if err := s.putTasksEach(ctx, tasks, time.Time{}); err != nil {
		return err
	}
	return s.putMarker(ctx, tasks, marker)
}

// putMarker writes a chunk's ready marker once its tasks exist: a marker
// written first could be looked at, find none of its tasks (the writer
// stalled), and leave the index, and the tasks written after it would
// then be watched by nothing once claimed (claims do not index their
// tasks). Unconditional: a repeated chunk writes it again. A crash before
// it leaves tasks without a marker, and their messages unsent: the stage's
// enqueued count has not moved, so the sweep repeats the chunk, which
// writes the marker.
func (s *Store) putMarker(ctx context.Context, tasks []domain.Task, marker map[string]types.AttributeValue) error {
	if _, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: marker}); err != nil {
		return fmt.Errorf("put ready marker of tasks %s..%s: %w", tasks[0].Ref, tasks[len(tasks)-1].Ref, err)
	}
	return nil
}

// MaxBatchStatements is DynamoDB's limit on the statements of one
// BatchExecuteStatement.
const MaxBatchStatements = 25

// insertTries bounds the tries of statements that failed for throttling
// or an internal error (the SDK retries a failed request, not a failed
// statement of an answered one).
const insertTries = 6

// insertItems writes items that do not exist yet, with PartiQL INSERTs in
// batches; items that exist are left as they are.
func (s *Store) insertItems(ctx context.Context, items []map[string]types.AttributeValue) error {
	for lo := 0; lo < len(items); lo += MaxBatchStatements {
		batch := items[lo:min(lo+MaxBatchStatements, len(items))]
		stmts := make([]types.BatchStatementRequest, len(batch))
		for i, it := range batch {
			stmts[i] = InsertStatement(s.table, it)
		}
		for try := 0; len(stmts) > 0; try++ {
			if try == insertTries {
				return fmt.Errorf("%d inserts still failing after %d tries", len(stmts), insertTries)
			}
			if try > 0 {
				if err := backoff(ctx, try); err != nil {
					return err
				}
			}
			out, err := s.db.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: stmts})
			if err != nil {
				return err
			}
			s.notePartiQLRan(out)
			var again []types.BatchStatementRequest
			for i, r := range out.Responses {
				if r.Error == nil || r.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem {
					continue
				}
				switch r.Error.Code {
				case types.BatchStatementErrorCodeEnumProvisionedThroughputExceeded, types.BatchStatementErrorCodeEnumRequestLimitExceeded,
					types.BatchStatementErrorCodeEnumThrottlingError, types.BatchStatementErrorCodeEnumInternalServerError,
					types.BatchStatementErrorCodeEnumTransactionConflict:
					again = append(again, stmts[i])
				default:
					return fmt.Errorf("insert: %s: %s", r.Error.Code, aws.ToString(r.Error.Message))
				}
			}
			stmts = again
		}
	}
	return nil
}

// InsertStatement is the PartiQL INSERT of item into table: a put that
// fails (DuplicateItem) when an item with its key exists. Attribute names
// are the store's own, in a fixed order; values are parameters.
func InsertStatement(table string, item map[string]types.AttributeValue) types.BatchStatementRequest {
	names := make([]string, 0, len(item))
	for n := range item {
		names = append(names, n)
	}
	slices.Sort(names)
	var b strings.Builder
	b.WriteString(`INSERT INTO "` + table + `" VALUE {`)
	params := make([]types.AttributeValue, len(names))
	for i, n := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("'" + n + "': ?")
		params[i] = item[n]
	}
	b.WriteString("}")
	return types.BatchStatementRequest{Statement: aws.String(b.String()), Parameters: params}
}

// unwrittenChunk says whether a chunk's tasks can stay unwritten until
// their claims (sm.TaskUnwritten), and returns the definition they share:
// each READY at attempt 0, due at once, with no input, no raised memory,
// and the same attempts and time.
func unwrittenChunk(tasks []domain.Task) (domain.Task, bool) {
	if len(tasks) == 0 {
		return domain.Task{}, false
	}
	def := tasks[0]
	for _, t := range tasks {
		if t.State != sm.TaskUnwritten || t.Attempt != 0 || t.Input != nil || t.Memory != 0 || !t.NotBefore.IsZero() ||
			t.MaxAttempts < 1 || t.MaxAttempts != def.MaxAttempts || !t.Updated.Equal(def.Updated) {
			return domain.Task{}, false
		}
	}
	return def, true
}

// readyMarkerFor is the ready marker of a chunk of tasks of one stage, due
// at due; nil when the tasks should go in the index themselves: a single
// task, tasks of several stages, or no due time (tests).
func readyMarkerFor(tasks []domain.Task, due time.Time) map[string]types.AttributeValue {
	if len(tasks) < 2 || due.IsZero() {
		return nil
	}
	lo, hi, one := stageRange(tasks)
	if !one {
		return nil
	}
	return readyMarkerItem(tasks[0].Ref.Job, tasks[0].Ref.Stage, lo, hi, due)
}

// stageRange is the partitions lo..hi-1 that tasks span, and whether they
// are all of one stage.
func stageRange(tasks []domain.Task) (lo, hi int, one bool) {
	if len(tasks) == 0 {
		return 0, 0, false
	}
	lo, hi = tasks[0].Ref.Partition, tasks[0].Ref.Partition+1
	for _, t := range tasks[1:] {
		if t.Ref.Job != tasks[0].Ref.Job || t.Ref.Stage != tasks[0].Ref.Stage {
			return 0, 0, false
		}
		lo, hi = min(lo, t.Ref.Partition), max(hi, t.Ref.Partition+1)
	}
	return lo, hi, true
}

// putTaskChunkIndexed writes tasks each with its own sweep index entry.
func (s *Store) putTaskChunkIndexed(ctx context.Context, tasks []domain.Task, due time.Time) error {
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
