package dynamo

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
)

// A stage's bad-record count is one item in its job's partition,
//
//	JOB#<job>   BADREC#<nn>   bad: records the stage's committed attempts rejected
//
// written only by commits that rejected records, so a stage without bad
// records never has one and its commits never touch it (no hot key: the
// common commit stays a two-item transaction on its own shard). It is one
// item, not a sharded counter, because its guard (bad <= max) must see the
// whole stage's count. A job's deletion removes it with the rest of its
// partition (DeleteJobRecords).
const badRecordsPrefix = "BADREC#"

const aBad = "bad"

func badRecordsSK(stage int) string { return fmt.Sprintf("%s%02d", badRecordsPrefix, stage) }

// badRecordsIndex is where the bad-record guard sits in the commit
// transaction: after the task and its counter shard.
const badRecordsIndex = 2

// badRecordsUpdate adds a commit's rejected records to its stage's count,
// guarded so the count never passes the stage's maxBadRecords. A
// condition cannot add, so the guard compares the count before the write
// with the room the limit leaves for this commit.
func (s *Store) badRecordsUpdate(p CommitParams) types.TransactWriteItem {
	room := int64(p.MaxBadRecords) - p.BadRecords
	return types.TransactWriteItem{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(p.Ref.Job), badRecordsSK(p.Ref.Stage)),
		ConditionExpression:       aws.String("attribute_not_exists(#bad) OR #bad <= :room"),
		UpdateExpression:          aws.String("ADD #bad :n"),
		ExpressionAttributeNames:  map[string]string{"#bad": aBad},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": nv(p.BadRecords), ":room": nv(room)},
	}}
}

// checkBadRecords refuses, before any write, a commit that rejected more
// records on its own than its stage allows.
func checkBadRecords(p CommitParams) error {
	if p.BadRecords > int64(p.MaxBadRecords) {
		return tooManyBadRecords(p)
	}
	return nil
}

// badRecordsRefused reports whether a cancelled commit transaction's
// reasons say the stage's count had no room for this commit's records
// while the task's own guard held.
func badRecordsRefused(p CommitParams, reasons []string) bool {
	return p.BadRecords > 0 && len(reasons) > badRecordsIndex &&
		reasons[0] == reasonNone && reasons[badRecordsIndex] == reasonCondFailed
}

func tooManyBadRecords(p CommitParams) error {
	return fmt.Errorf("commit task %s attempt %d: its %d rejected records would take the stage past its maxBadRecords (%d): %w: %w",
		p.Ref, p.Attempt, p.BadRecords, p.MaxBadRecords, domain.ErrTooManyBadRecords, domain.ErrPermanent)
}

// BadRecordCounts reads how many records each stage of a job rejected in
// committed attempts, by stage index; a stage without any is absent. One
// Query of the job's partition, whatever the number of tasks.
func (s *Store) StageBadRecordCounts(ctx context.Context, job string) (map[int]int64, error) {
	out := map[int]int64{}
	var start map[string]types.AttributeValue
	for {
		page, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pre)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": sv(jobPK(job)), ":pre": sv(badRecordsPrefix),
			},
			ExclusiveStartKey: start,
			ConsistentRead:    aws.Bool(true),
		})
		if err != nil {
			return nil, fmt.Errorf("bad-record counts of job %s: %w", job, err)
		}
		for _, it := range page.Items {
			idx, err := strconv.Atoi(strings.TrimPrefix(getS(it, attrSK), badRecordsPrefix))
			if err != nil {
				return nil, fmt.Errorf("bad-record count key %q: %w", getS(it, attrSK), err)
			}
			out[idx] = getN(it, aBad)
		}
		if start = page.LastEvaluatedKey; start == nil {
			return out, nil
		}
	}
}
