package dynamo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	sm "github.com/batchwork/batchwork/statemachine"
)

// aDataDeleted is when a job's data was first asked to be deleted, on the
// job item.
const aDataDeleted = "ddel"

// MarkDataDeleted records on an ended job that its data is being deleted
// and returns when that was first recorded: a repeated call keeps the
// first time. The job must have ended (a state of sm.Jobs.Terminal);
// otherwise it reports sm.ErrInvalidTransition, and domain.ErrNotFound for
// no such job. The job's state does not change: the record only says its
// objects are gone.
func (s *Store) JobMarkDataDeleted(ctx context.Context, id string, now time.Time) (time.Time, error) {
	vals := map[string]types.AttributeValue{":now": ms(now)}
	ended := make([]string, len(sm.Jobs.Terminal))
	for i, st := range sm.Jobs.Terminal {
		ph := ":s_" + string(st)
		vals[ph] = sv(string(st))
		ended[i] = ph
	}
	var out *dynamodb.UpdateItemOutput
	for try := 0; ; try++ {
		// Refused while a rerun reusing its outputs lives (reuselinks.go).
		guard, ver, err := s.reuseGuard(ctx, id, vals)
		if err != nil {
			return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, err)
		}
		out, err = s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 &s.table,
			Key:                       key(jobPK(id), jobSK),
			UpdateExpression:          aws.String("SET " + aDataDeleted + " = if_not_exists(" + aDataDeleted + ", :now)"),
			ConditionExpression:       aws.String("attribute_exists(pk) AND #st IN (" + strings.Join(ended, ", ") + ")" + guard),
			ExpressionAttributeNames:  stNames,
			ExpressionAttributeValues: vals,
			ReturnValues:              types.ReturnValueUpdatedNew,
		})
		if isCondFailed(err) {
			// Missing, still running, or a rerun linked itself since the
			// guard read: which one is the caller's answer.
			if _, serr := s.JobState(ctx, id); serr != nil {
				return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, serr)
			}
			raced, rerr := s.reuseRaced(ctx, id, ver)
			if rerr != nil {
				return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, rerr)
			}
			if raced && try < 3 {
				continue
			}
			return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, sm.ErrInvalidTransition)
		}
		if err != nil {
			return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, err)
		}
		break
	}
	at := getT(out.Attributes, aDataDeleted)
	if at.IsZero() {
		return time.Time{}, fmt.Errorf("mark job %s data deleted: the answer holds no %s", id, aDataDeleted)
	}
	return at, nil
}
