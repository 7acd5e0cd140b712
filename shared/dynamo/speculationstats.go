package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A stage's speculative copies, as `batchwork status` shows them:
//
//	xl    on the stage item: copies launched (claimed), added by
//	      ClaimCopy's transaction, so exactly once per copy
//	xrun  on the stage item: copies running (requested or claimed, not
//	      ended) when the sweep last looked at the stage (control
//	      speculate), written only when it changed
//	xw    on the stage's counter shards: copies that committed (won),
//	      added by the commit's own counter update (CommitParams.Copy)
//
// The running count is the sweep's: every way a copy ends would
// otherwise have to count it down. A stage's stage item is written once
// per copy and per change of its running count, so speculation adds no
// write to a task that is not copied.
const (
	aCopiesLaunched = "xl"
	aCopiesRunning  = "xrun"
	aCopiesWon      = "xw"
)

// copyLaunchedAdd is ClaimCopy's count of the copy on its stage item.
func copyLaunchedAdd(table string, ref domain.TaskRef) types.TransactWriteItem {
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &table, Key: key(jobPK(ref.Job), stageSK(ref.Stage)),
		UpdateExpression:          aws.String("ADD " + aCopiesLaunched + " :one"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": nv(1)},
	}}
}

// decodeCopyCounts reads a stage item's copy counts into st.
func decodeCopyCounts(st *domain.Stage, it map[string]types.AttributeValue) {
	st.CopiesLaunched = int(getN(it, aCopiesLaunched))
	st.CopiesRunning = int(getN(it, aCopiesRunning))
}

// SetCopiesRunning records the copies of a RUNNING stage that run, as the
// sweep counted them (nothing when the stage ended meanwhile).
func (s *Store) StageSetCopiesRunning(ctx context.Context, job string, idx, n int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:         aws.String("SET " + aCopiesRunning + " = :n"),
		ConditionExpression:      aws.String("#st = :run"),
		ExpressionAttributeNames: stNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n": nv(int64(n)), ":run": sv(string(sm.StageRunning)),
		},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("set running copies of stage %s/%d: %w", job, idx, err)
	}
	return nil
}
