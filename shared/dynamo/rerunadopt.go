package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// AdoptTolerated records on a rerun's reused stage how many of its
// source stage's tasks failed within their allowance, so the rerun's
// status and manifest count the partitions its reused outputs lack. It
// is written before AdoptStage plans the stage (same condition: running,
// not planned yet), so a stage that completes always carries it; a
// repeat after the stage was planned changes nothing.
func (s *Store) StageAdoptTolerated(ctx context.Context, job string, idx, tolerated int) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(jobPK(job), stageSK(idx)),
		UpdateExpression:         aws.String("SET " + aTolerated + " = :n"),
		ConditionExpression:      aws.String("#st = :run AND attribute_not_exists(tot)"),
		ExpressionAttributeNames: stNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":n": nv(int64(tolerated)), ":run": sv(string(sm.StageRunning)),
		},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("adopt the tolerated failures of stage %s/%d: %w", job, idx, err)
	}
	return nil
}

// IdempotentJob is the job an owner's idempotency key already made, if
// any (read consistently). A rerun asks it before its checks of the
// present (an output folder claimed, a source deleted), which the job
// the key made may itself have changed since the request's first try.
func (s *Store) JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(idemPK(owner, idemKey), idemSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", false, fmt.Errorf("read idempotency record: %w", err)
	}
	id := getS(out.Item, aJob)
	return id, id != "", nil
}
