package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// startedOverMissed records a started run r over the missed record of its
// time that also summarises later times (catchUp=skipMissed, planned by a
// firer past the grace while another started r's job on time): the
// started record takes its place and keeps the summary of the others
// (Through, one fewer missed), on the condition that the record is still
// the one read. Any other record refuses it (the first record wins), with
// the put's refusal.
func (s *Store) startedOverMissed(ctx context.Context, id string, r Run) error {
	k := key(runPK(id), runSK(r.Scheduled))
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &s.table, Key: k, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("read run of schedule %s at %s: %w", id, r.Scheduled.Format(time.RFC3339), err)
	}
	old := out.Item
	missed := getN(old, aMissed)
	through := getNS(old, aThrough)
	if RunAction(getS(old, aAction)) != RunMissed || missed < 2 || !through.After(r.Scheduled) {
		return &types.ConditionalCheckFailedException{Message: aws.String("a run of this time is recorded")}
	}
	r.Through, r.Missed = through, missed-1
	r.Note = fmt.Sprintf("%d later scheduled times through %s missed during downtime; skipped by catchUp=skipMissed",
		r.Missed, through.UTC().Format(time.RFC3339))
	put := s.runPut(id, r)
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: put.TableName, Item: put.Item,
		ConditionExpression: aws.String("act = :mi AND " + aMissed + " = :n AND " + aThrough + " = :thr"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":mi": sv(string(RunMissed)), ":n": nv(missed), ":thr": nsv(through),
		},
	})
	return err
}
