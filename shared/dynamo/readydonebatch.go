package dynamo

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A COMPLETED stage's markers fall due together, StuckAfter after their
// chunks, but their keys hash them apart over the index shards, so each
// shard's Query finds one or two of them. DueList therefore does not take
// them out one write each: it keeps them, and DueRemoveDone (which a
// sweep run calls after its walk) takes them all out together, up to
// doneBatch to a transaction: one request for a 2,000-task stage's 20
// markers instead of 20. Each removal stays conditional on the due time
// the Query read, as moveMarker's is. A marker kept and never removed
// (the process ended first, the request failed) is still in the index,
// due, and the next run finds it again: its removal only waits.

// doneBatch is the most markers one transaction removes (DynamoDB's cap on
// a transaction's actions); DueList removes what it keeps at once when it
// keeps this many, so the memory held between runs stays bounded.
const doneBatch = 100

// doneMarkers are the markers of COMPLETED stages that DueList or DueScan
// found and DueRemoveDone has not removed yet, by key: one marker found
// twice (two runs, the first one's removal never made) is removed once.
type doneMarkers struct {
	mu sync.Mutex
	ms map[string]readyMarker
}

// add keeps m and says whether a full batch is kept.
func (d *doneMarkers) add(m readyMarker) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ms == nil {
		d.ms = map[string]readyMarker{}
	}
	d.ms[m.pk+"/"+m.sk] = m
	return len(d.ms) >= doneBatch
}

func (d *doneMarkers) take() []readyMarker {
	d.mu.Lock()
	defer d.mu.Unlock()
	ms := make([]readyMarker, 0, len(d.ms))
	for _, m := range d.ms {
		ms = append(ms, m)
	}
	d.ms = nil
	return ms
}

// DueRemoveDone takes out of the index the markers of COMPLETED stages
// that DueList or DueScan found since the last call (see above). A sweep
// run calls it after its read of the index.
func (s *Store) DueRemoveDone(ctx context.Context) error {
	ms := s.done.take()
	var errs []error
	for len(ms) > 0 {
		n := min(len(ms), doneBatch)
		errs = append(errs, s.removeDone(ctx, ms[:n]))
		ms = ms[n:]
	}
	return errors.Join(errs...)
}

// removeDone removes up to doneBatch markers in one transaction. A
// transaction refused (a marker written again or removed since its read,
// a conflict, a throttle) leaves every marker as it was, and each is then
// removed on its own, whose refused condition is no error.
func (s *Store) removeDone(ctx context.Context, ms []readyMarker) error {
	if len(ms) > 1 {
		items := make([]types.TransactWriteItem, len(ms))
		for i, m := range ms {
			items[i] = types.TransactWriteItem{Update: &types.Update{
				TableName: &s.table, Key: m.key,
				UpdateExpression:          aws.String("REMOVE gpk, due"),
				ConditionExpression:       aws.String("due = :due"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":due": m.due},
			}}
		}
		if _, err := s.db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err == nil {
			return nil
		}
	}
	var errs []error
	for _, m := range ms {
		errs = append(errs, s.moveMarker(ctx, m, time.Time{}))
	}
	return errors.Join(errs...)
}
