package dynamo

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Job-state records: a job's status, and nothing else, copied
// JobStateShards times under partition keys of their own:
//
//	JST#<job>#<k>                   JST         the job's state, k < JobStateShards
//
// Claims and heartbeats need only whether the job still runs, and the job
// item holds the whole spec (up to 256 KiB): DynamoDB bills a read by the
// item's size, whatever the projection, so a strongly consistent read of
// the job item costs up to 64 read units, and reading it for every claim
// made the job's partition key the ceiling of a job (a few thousand claims
// a second). A state record is under 100 bytes (one read unit), and
// readers spread over the copies.
//
// Every copy is written in the same transaction as the job item's own
// state: all of them at creation (RUNNING), all of them in the guarded
// transition that ends the job (EndJob; the job item's condition stays the
// authority). Transactions are atomic and a strongly consistent GetItem
// after one sees all of it, so any copy read consistently is as current as
// the job item.
const (
	// JobStateShards is the number of copies of each job's state record.
	// Each process reads a random copy at most once per
	// tuning.JobStateTTL per job (control's job-state cache), so 8 copies
	// take 24,000 processes a second within the 3,000 read units of one
	// partition key.
	JobStateShards = 8
	jobStateSK     = "JST"
)

func jobStatePK(job string, shard int) string { return "JST#" + job + "#" + strconv.Itoa(shard) }

// jobStatePuts are the transaction parts that write every copy of a job's
// state record.
func (s *Store) jobStatePuts(job string, state sm.JobState, now time.Time) []types.TransactWriteItem {
	items := make([]types.TransactWriteItem, JobStateShards)
	for k := range items {
		items[k] = types.TransactWriteItem{Put: &types.Put{
			TableName: &s.table,
			Item: map[string]types.AttributeValue{
				attrPK: sv(jobStatePK(job, k)), attrSK: sv(jobStateSK),
				aState: sv(string(state)), aUpdated: ms(now),
			},
		}}
	}
	return items
}

// JobState reads a job's status consistently from a copy of its state
// record chosen at random, never from the spec-bearing job item (a job
// created before the state records existed is read from its job item).
func (s *Store) JobState(ctx context.Context, id string) (sm.JobState, error) {
	return s.JobStateShard(ctx, id, rand.IntN(JobStateShards))
}

// JobStateShard reads copy shard of a job's state record consistently.
func (s *Store) JobStateShard(ctx context.Context, id string, shard int) (sm.JobState, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobStatePK(id, shard%JobStateShards), jobStateSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", fmt.Errorf("read job %s status: %w", id, err)
	}
	if out.Item == nil {
		return s.jobItemState(ctx, id)
	}
	return sm.JobState(getS(out.Item, aState)), nil
}

// jobItemState reads the status on the job item itself: for jobs created
// before their state records existed, and to tell a missing job.
func (s *Store) jobItemState(ctx context.Context, id string) (sm.JobState, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(id), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#st"), ExpressionAttributeNames: stNames,
	})
	if err != nil {
		return "", fmt.Errorf("read job %s status: %w", id, err)
	}
	if out.Item == nil {
		return "", fmt.Errorf("read job %s status: %w", id, domain.ErrNotFound)
	}
	return sm.JobState(getS(out.Item, aState)), nil
}
