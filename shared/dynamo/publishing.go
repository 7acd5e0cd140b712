package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// StartPublishing moves a RUNNING job whose stages have all completed to
// PUBLISHING (sm.JobPublish), for the publisher to end with EndJob
// (sm.JobPublished or sm.JobPublishFail). It reports
// sm.ErrInvalidTransition when the job is not RUNNING. The job is not
// ended: it keeps its quotas until EndJob, and it leaves the sweep
// index's deadline entry, since a PUBLISHING job's deadline no longer
// ends it (its publishing is retried through its last stage's entry).
// The owner's job index and every copy of the job's state record change
// in the same transaction, as EndJob's do.
func (s *Store) JobStartPublishing(ctx context.Context, id string, now time.Time) error {
	const ev = sm.JobPublish
	head, err := s.jobHead(ctx, id)
	if err != nil {
		return fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	tr := sm.Jobs.Transition(ev)
	c := newCond()
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(now)
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(id), jobSK),
		UpdateExpression:          aws.String("SET #st = :to, upd = :now REMOVE gpk, due"),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  map[string]string{"#st": aState},
		ExpressionAttributeValues: c.values,
	}}, {Put: &types.Put{
		TableName: &s.table, Item: ownerIndexItem(head.Owner, id, head.Name, tr.To, head.Created, time.Time{}),
	}}}
	items = append(items, s.jobStatePuts(id, tr.To, now)...)
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
		return fmt.Errorf("%s job %s: %w", ev, id, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("%s job %s: %w", ev, id, err)
	}
	return nil
}
