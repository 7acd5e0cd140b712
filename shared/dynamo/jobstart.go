package dynamo

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/schedule"
	sm "github.com/batchwork/batchwork/statemachine"
)

// A job submitted with a start time (CreateJobParams.StartAt) is written
// WAITING, with no root stage in the sweep index, and with a start entry
// in the schedules' upcoming-firings index, in its own transaction:
//
//	SCHB#<minute>#<nn>   <job>    kd=start: the job's start, found by the sweep and the timer handoff
//
// JobStart moves it to RUNNING, puts its root stages in the sweep index
// (as a submission's are), deletes the entry and writes the start's event
// to the outbox, all in one transaction
// guarded by the job's WAITING state, so it starts once whoever gets there
// first, and a crash after it is repaired by the sweep's start of the root
// stages exactly as a submitter's crash is.

const (
	aStartAt   = "jsa" // job: when it starts (a job submitted with a start time)
	aEntryKind = "kd"  // index entry: entryStart, or none for a schedule's firing
	entryStart = "start"
)

// StartBucket is the index bucket of a job's start entry.
func StartBucket(job string, at time.Time) schedule.Bucket { return schedule.BucketOf(job, at) }

func startEntryItem(owner, job string, at, now time.Time) map[string]types.AttributeValue {
	it := bucketItem(owner, job, at, now)
	it[aEntryKind] = sv(entryStart)
	return it
}

// sk is the entry's sort key: its schedule, or its job for a start entry.
func (e IndexEntry) sk() string {
	if e.Job != "" {
		return e.Job
	}
	return e.ScheduleID
}

// JobStartParams starts a WAITING job.
type JobStartParams struct {
	Job string
	// Roots are the job's root stages: they enter the sweep index at
	// StageDue, in case the starter dies before starting them.
	Roots    []int
	Now      time.Time
	StageDue time.Time
	// Entry is the job's start entry, deleted with the start.
	Entry IndexEntry
	// Owner, Name and Created are the job's, for its owner's list entry
	// (Owner empty: JobStart reads them).
	Owner, Name string
	Created     time.Time
	// Outbox, when set, is the start's event (StartedEvent), written in
	// the start's transaction.
	Outbox *events.Event
}

// JobStart moves a WAITING job to RUNNING (sm.JobStart), with its state
// copies and its owner's list entry, puts its root stages in the sweep
// index and deletes its start entry, in one transaction. A job not
// WAITING (started already, or cancelled) gives sm.ErrInvalidTransition
// and nothing changes.
func (s *Store) JobStart(ctx context.Context, p JobStartParams) error {
	head := jobHeader{Owner: p.Owner, Name: p.Name, Created: p.Created}
	if p.Owner == "" {
		var err error
		if head, err = s.jobHead(ctx, p.Job); err != nil {
			return fmt.Errorf("start job %s: %w", p.Job, err)
		}
	}
	tr := sm.Jobs.Transition(sm.JobStart)
	c := newCond()
	expr := transition(c, tr)
	to(c, tr)
	c.values[":now"] = ms(p.Now)
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: key(jobPK(p.Job), jobSK),
		UpdateExpression:          aws.String("SET #st = :to, upd = :now, " + aStarted + " = :now"),
		ConditionExpression:       aws.String(expr),
		ExpressionAttributeNames:  stNames,
		ExpressionAttributeValues: c.values,
	}}, {Put: &types.Put{
		TableName: &s.table, Item: ownerIndexItem(head.Owner, p.Job, head.Name, tr.To, head.Created, time.Time{}),
	}}}
	items = append(items, s.jobStatePuts(p.Job, tr.To, p.Now)...)
	for _, idx := range p.Roots {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &s.table, Key: key(jobPK(p.Job), stageSK(idx)),
			UpdateExpression:         aws.String("SET gpk = :gpk, #due = :due"),
			ExpressionAttributeNames: map[string]string{"#due": attrDue},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":gpk": sv(duePK(jobPK(p.Job) + stageSK(idx))), ":due": ms(p.StageDue),
			},
		}})
	}
	if p.Entry.Job != "" {
		items = append(items, types.TransactWriteItem{Delete: &types.Delete{
			TableName: &s.table, Key: key(bucketPK(p.Entry.Bucket), p.Entry.sk()),
		}})
	}
	if p.Outbox != nil {
		put, err := s.outboxPut(*p.Outbox)
		if err != nil {
			return fmt.Errorf("start job %s: %w", p.Job, err)
		}
		items = append(items, put)
	}
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
		return fmt.Errorf("start job %s: %w", p.Job, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("start job %s: %w", p.Job, err)
	}
	return nil
}

// startWatermark starts the firing watermark if no schedule or start
// entry was ever written: the sweep reads the index only from it.
func (s *Store) startWatermark(ctx context.Context, now time.Time) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table, ConditionExpression: aws.String("attribute_not_exists(pk)"),
		Item: map[string]types.AttributeValue{
			attrPK: sv(watermarkKey), attrSK: sv(watermarkKey),
			aWater: ms(now.UTC().Truncate(time.Minute).Add(-time.Minute)),
		},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("start watermark: %w", err)
	}
	return nil
}
