package dynamo

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Deleting a job (DELETE /jobs/{id}) removes every record of it, in steps
// that each can be repeated:
//
//  1. MarkJobDeleting: on the ended job item, jdel (when the deletion was
//     asked), and out of its owner's job index, in one transaction. From
//     then on the API answers 404 for the job and lists it nowhere.
//  2. (control) the job's objects under jobs/<id>/.
//  3. DeleteJobRecords: each stage's tasks, attempt ends and counters,
//     then the stage item (it holds the counts that name its children),
//     then the job's timeline, state copies and slot item, within a
//     budget per call.
//  4. DeleteJobItem: the idempotency record, if it still names this job,
//     and the job item, last: while it exists a repeat of the deletion
//     finds what is left to do.
//
// A step interrupted half-way is finished by a repeat of the deletion. A
// record is deleted unconditionally (a Delete part of a transaction, the
// dynamodb:DeleteItem action the api already has for schedules): deleting
// what is already gone is no error.
const (
	// aDeleting is when a job's deletion was first asked, on the job item.
	aDeleting = "jdel"
	// aIdemKey is the idempotency key a job was created with, on the job
	// item, so its deletion can delete the idempotency record too (jobs
	// created before it was stored leave theirs to its TTL).
	aIdemKey = "idk"
)

// MarkJobDeleting records on an ended job that it is being deleted and
// takes it out of its owner's job index, in one transaction; a repeated
// call keeps the first time. It reports sm.ErrInvalidTransition for a job
// that has not ended (RUNNING or PUBLISHING), and domain.ErrNotFound for no
// such job.
func (s *Store) JobMarkDeleting(ctx context.Context, id, owner string, now time.Time) error {
	vals := map[string]types.AttributeValue{":now": ms(now)}
	ended := make([]string, len(sm.Jobs.Terminal))
	for i, st := range sm.Jobs.Terminal {
		ph := ":s_" + string(st)
		vals[ph] = sv(string(st))
		ended[i] = ph
	}
	for try := 0; ; try++ {
		// Refused while a rerun reusing its outputs lives (reuselinks.go).
		guard, ver, err := s.reuseGuard(ctx, id, vals)
		if err != nil {
			return fmt.Errorf("mark job %s deleting: %w", id, err)
		}
		err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 &s.table,
			Key:                       key(jobPK(id), jobSK),
			UpdateExpression:          aws.String("SET " + aDeleting + " = if_not_exists(" + aDeleting + ", :now)"),
			ConditionExpression:       aws.String("attribute_exists(pk) AND #st IN (" + strings.Join(ended, ", ") + ")" + guard),
			ExpressionAttributeNames:  stNames,
			ExpressionAttributeValues: vals,
		}}, {Delete: &types.Delete{
			TableName: &s.table, Key: key(ownerPK(owner), ownerJobSK(id)),
		}}}})
		if reasons := cancelReasons(err); len(reasons) > 0 && reasons[0] == reasonCondFailed {
			if _, serr := s.jobItemState(ctx, id); serr != nil {
				return fmt.Errorf("mark job %s deleting: %w", id, serr)
			}
			if raced, rerr := s.reuseRaced(ctx, id, ver); rerr != nil || (raced && try < 3) {
				if rerr != nil {
					return fmt.Errorf("mark job %s deleting: %w", id, rerr)
				}
				continue
			}
			return fmt.Errorf("mark job %s deleting: %w", id, sm.ErrInvalidTransition)
		}
		if err != nil {
			return fmt.Errorf("mark job %s deleting: %w", id, err)
		}
		return nil
	}
}

// jobRecordPlan names records of a job to delete: keys known without
// reading, and partitions whose every item goes.
type jobRecordPlan struct {
	// fixed are keys known without reading: counters, state copies.
	fixed []map[string]types.AttributeValue
	// partitions are partition keys whose every item goes (tasks,
	// attempt ends, ready markers (ready.go), timeline).
	partitions []string
}

// stageRecordPlan is what a job's stage s leaves besides its own item.
func stageRecordPlan(job string, st domain.Stage) jobRecordPlan {
	var p jobRecordPlan
	for k := 0; k < st.Shards; k++ {
		p.fixed = append(p.fixed, key(shardPK(job, st.Index, k), cntSK))
	}
	for b := 0; b*TaskBucket < st.Total; b++ {
		p.partitions = append(p.partitions, taskBucketPK(job, st.Index, b), attemptPK(job, st.Index, b), readyPK(job, st.Index, b))
	}
	return p
}

// jobLevelPlan is what the job leaves besides its stages: the timeline
// shards and the state copies.
func jobLevelPlan(job string) jobRecordPlan {
	var p jobRecordPlan
	for k := 0; k < EventShards; k++ {
		p.partitions = append(p.partitions, eventPK(job, k))
	}
	for k := 0; k < JobStateShards; k++ {
		p.fixed = append(p.fixed, key(jobStatePK(job, k), jobStateSK))
	}
	return p
}

// DeleteJobRecords deletes a job's records other than its job item and
// idempotency record, at most about budget of them (budget <= 0: no
// bound), and says how many it deleted and whether none is left. The job
// must be marked deleting (MarkJobDeleting) first: nothing else then
// writes its records, but for an attempt that was still running when the
// job ended and records its end late (docs/security.md, Deleting a job).
func (s *Store) JobDeleteRecords(ctx context.Context, job string, budget int) (deleted int, complete bool, err error) {
	if budget <= 0 {
		budget = int(^uint(0) >> 1)
	}
	del := &deleter{s: s, budget: budget}
	stages, err := s.StageList(ctx, job)
	if err != nil {
		return 0, false, err
	}
	// Each stage's children and then the stage item (a stage item is
	// what names its children, so it goes after them), then the job's
	// own records.
	for _, st := range stages {
		done, err := del.plan(ctx, stageRecordPlan(job, st))
		if err != nil || !done {
			return del.n, false, err
		}
		if err := del.keys(ctx, []map[string]types.AttributeValue{key(jobPK(job), stageSK(st.Index))}); err != nil {
			return del.n, false, err
		}
	}
	if done, err := del.plan(ctx, jobLevelPlan(job)); err != nil || !done {
		return del.n, false, err
	}
	// A rerun's links in its sources' partitions (reuselinks.go), read
	// from its job item, which goes last, so a repeat finds them again.
	links, err := s.reuseLinkKeys(ctx, job)
	if err != nil {
		return del.n, false, err
	}
	if err := del.keys(ctx, links); err != nil {
		return del.n, false, err
	}
	// Whatever else the job's partition holds (its slot item), but the
	// job item.
	done, err := del.partition(ctx, jobPK(job), func(sk string) bool { return sk != jobSK })
	if err == nil {
		err = del.flush(ctx)
	}
	return del.n, done && err == nil, err
}

// DeleteJobItem deletes the job's idempotency record, when the job item
// names its key and the record still names this job, and then the job
// item, the last of its records, and says how many records it deleted. A
// job already gone is no error.
func (s *Store) JobDeleteItem(ctx context.Context, job string) (int, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#own, " + aIdemKey), ExpressionAttributeNames: map[string]string{"#own": aOwner},
	})
	if err != nil {
		return 0, fmt.Errorf("delete job %s: %w", job, err)
	}
	if out.Item == nil {
		return 0, nil
	}
	n := 0
	if k := getS(out.Item, aIdemKey); k != "" {
		// Only if it still names this job: once its TTL passed, the key may
		// name a newer job.
		err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
			TableName: &s.table, Key: key(idemPK(getS(out.Item, aOwner), k), idemSK),
			ConditionExpression:       aws.String(aJob + " = :job"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":job": sv(job)},
		}}}})
		switch reasons := cancelReasons(err); {
		case err == nil:
			n++
		case len(reasons) == 0 || reasons[0] != reasonCondFailed:
			return n, fmt.Errorf("delete job %s idempotency record: %w", job, err)
		}
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{
		TableName: &s.table, Key: key(jobPK(job), jobSK),
	}}}})
	if err != nil {
		return n, fmt.Errorf("delete job %s: %w", job, err)
	}
	return n + 1, nil
}

// deleter deletes keys in transactions of up to MaxTxItems Delete parts,
// counting them against a budget.
type deleter struct {
	s       *Store
	budget  int
	n       int
	pending []map[string]types.AttributeValue
}

func (d *deleter) full() bool { return d.n+len(d.pending) >= d.budget }

// plan deletes p's partitions while the budget lasts, and once they are
// all empty its fixed keys that exist; done says it got that far.
func (d *deleter) plan(ctx context.Context, p jobRecordPlan) (done bool, err error) {
	for _, pk := range p.partitions {
		done, err := d.partition(ctx, pk, nil)
		if err != nil {
			return false, err
		}
		if !done {
			return false, d.flush(ctx)
		}
	}
	existing, err := d.existing(ctx, p.fixed)
	if err != nil {
		return false, err
	}
	if err := d.keys(ctx, existing); err != nil {
		return false, err
	}
	return true, d.flush(ctx)
}

// existing returns the keys of keys whose items exist, so a repeat
// neither writes nor counts what is gone.
func (d *deleter) existing(ctx context.Context, keys []map[string]types.AttributeValue) ([]map[string]types.AttributeValue, error) {
	var found []map[string]types.AttributeValue
	for lo := 0; lo < len(keys); lo += 100 {
		batch := keys[lo:min(lo+100, len(keys))]
		for len(batch) > 0 {
			out, err := d.s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
				d.s.table: {Keys: batch, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk, sk")},
			}})
			if err != nil {
				return nil, fmt.Errorf("read records to delete: %w", err)
			}
			for _, it := range out.Responses[d.s.table] {
				found = append(found, key(getS(it, attrPK), getS(it, attrSK)))
			}
			batch = out.UnprocessedKeys[d.s.table].Keys
		}
	}
	return found, nil
}

// partition deletes every item of partition pk whose sort key keep
// accepts (nil: all) while the budget lasts; done says it reached the
// partition's end.
func (d *deleter) partition(ctx context.Context, pk string, keep func(sk string) bool) (done bool, err error) {
	// What is pending may be in this partition: a Query would list it
	// again, and a transaction cannot delete one item twice.
	if err := d.flush(ctx); err != nil {
		return false, err
	}
	in := &dynamodb.QueryInput{
		TableName:                 &d.s.table,
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(pk)},
		ProjectionExpression:      aws.String("pk, sk"),
		ConsistentRead:            aws.Bool(true),
	}
	for !d.full() {
		in.Limit = aws.Int32(int32(min(d.budget-d.n-len(d.pending), 1000)))
		out, err := d.s.db.Query(ctx, in)
		if err != nil {
			return false, fmt.Errorf("list records under %s: %w", pk, err)
		}
		var keys []map[string]types.AttributeValue
		for _, it := range out.Items {
			if keep == nil || keep(getS(it, attrSK)) {
				keys = append(keys, key(getS(it, attrPK), getS(it, attrSK)))
			}
		}
		if err := d.keys(ctx, keys); err != nil {
			return false, err
		}
		if out.LastEvaluatedKey == nil {
			return true, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return false, nil
}

func (d *deleter) keys(ctx context.Context, keys []map[string]types.AttributeValue) error {
	for _, k := range keys {
		d.pending = append(d.pending, k)
		if len(d.pending) == MaxTxItems {
			if err := d.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (d *deleter) flush(ctx context.Context) error {
	if len(d.pending) == 0 {
		return nil
	}
	items := make([]types.TransactWriteItem, len(d.pending))
	for i, k := range d.pending {
		items[i] = types.TransactWriteItem{Delete: &types.Delete{TableName: &d.s.table, Key: k}}
	}
	if err := d.s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		return fmt.Errorf("delete %d records: %w", len(items), err)
	}
	d.n += len(d.pending)
	d.pending = d.pending[:0]
	return nil
}

// liveJobCheck is the transaction part that holds while the job exists
// and is not marked deleting. A writer of the job's history (attempt ends,
// timeline events) adds it: an attempt still running when its job ended
// may record its end after the job was marked deleting, when the deletion
// may already have read the partition it writes to; the record would then
// outlive the job, with nothing to find it by and no TTL. The check is
// serialised with MarkJobDeleting's transaction, so a record is either
// written before the mark (and deleted with the job) or not at all.
func liveJobCheck(table, job string) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: &table, Key: key(jobPK(job), jobSK),
		ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(" + aDeleting + ")"),
	}}
}

// putHistory writes item, a history record of job (a timeline event),
// unless the job is deleted or being deleted (liveJobCheck): then it
// writes nothing and reports domain.ErrNotFound.
func (s *Store) putHistory(ctx context.Context, job string, item map[string]types.AttributeValue) error {
	err := s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Put: &types.Put{TableName: &s.table, Item: item}}, liveJobCheck(s.table, job),
	}})
	if r := cancelReasons(err); len(r) > 1 && r[1] == reasonCondFailed {
		return fmt.Errorf("job %s is deleted or being deleted: %w", job, domain.ErrNotFound)
	}
	return err
}
