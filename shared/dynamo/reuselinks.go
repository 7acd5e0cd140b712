package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/domain"
)

// Reuse links. A rerun reuses the committed outputs of its source jobs in
// place (its manifests name their objects), so a source's data must
// outlive every rerun that reuses it, or the rerun's published outputs
// would change. The transaction that creates a rerun writes, for each job
// whose tasks committed a stage it reuses (the transitive source: RerunParams.Reuse
// names it), a link item REUSEDBY#<rerun> in that job's partition and
// raises a version on that job's item (aReuseVer), conditional on that
// job existing and being neither marked deleting nor data-deleted.
// Deleting a job's data or the job (MarkDataDeleted, MarkJobDeleting)
// reads the version, finds the linked jobs that still exist with their
// data (refused with *domain.ReusedError if any), and marks the job on the
// condition that the version is unchanged. Both writes are on the source's
// job item, so DynamoDB serialises them: either the rerun commits first
// (the mark's condition fails, the deletion re-reads and is refused) or
// the mark does (the rerun's condition fails: ErrSourceGone). A link to a
// rerun whose data was deleted is dead; it goes with the rerun's records
// (DeleteJobRecords), or its source's. The source's job item only carries
// one number, however many reruns reuse it.
const (
	aReuseVer      = "rbv"
	reusedByPrefix = "REUSEDBY#"
)

func reusedBySK(job string) string { return reusedByPrefix + job }

// ErrSourceGone: a job whose outputs a rerun would reuse was deleted, or
// its data was, or either is under way; the rerun is not created.
var ErrSourceGone = errors.New("a job whose outputs the rerun reuses is deleted or its data is deleted")

// ErrTooManySources: a rerun would reuse the outputs of more jobs than
// the transaction that creates it can link (two parts each, beside a part
// per stage); nothing is written.
var ErrTooManySources = errors.New("the rerun reuses outputs of too many jobs")

// linkItems are the transaction parts that link a new rerun job to each
// job it reuses outputs of.
func (p *RerunParams) linkItems(table, job string) []types.TransactWriteItem {
	if p == nil {
		return nil
	}
	var srcs []string
	for _, src := range p.Reuse {
		if !slices.Contains(srcs, src) {
			srcs = append(srcs, src)
		}
	}
	slices.Sort(srcs)
	var items []types.TransactWriteItem
	for _, src := range srcs {
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &table, Key: key(jobPK(src), jobSK),
			UpdateExpression: aws.String("ADD " + aReuseVer + " :one"),
			ConditionExpression: aws.String("attribute_exists(pk) AND attribute_not_exists(" + aDeleting +
				") AND attribute_not_exists(" + aDataDeleted + ")"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": nv(1)},
		}}, types.TransactWriteItem{Put: &types.Put{
			TableName: &table, Item: map[string]types.AttributeValue{
				attrPK: sv(jobPK(src)), attrSK: sv(reusedBySK(job)), aJob: sv(job),
			},
		}})
	}
	return items
}

// ReusedBy lists the jobs linked as reusing job's outputs that still
// exist with their data, and the reuse version they were read at.
func (s *Store) JobReusedBy(ctx context.Context, job string) (ver int64, living []string, err error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(aReuseVer),
	})
	if err != nil {
		return 0, nil, fmt.Errorf("read reuse version of job %s: %w", job, err)
	}
	ver = getN(out.Item, aReuseVer)
	if ver == 0 {
		return 0, nil, nil // never linked
	}
	var start map[string]types.AttributeValue
	for {
		q, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:              &s.table,
			KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pre)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": sv(jobPK(job)), ":pre": sv(reusedByPrefix),
			},
			ConsistentRead: aws.Bool(true), ExclusiveStartKey: start,
		})
		if err != nil {
			return 0, nil, fmt.Errorf("list the jobs reusing job %s: %w", job, err)
		}
		for _, it := range q.Items {
			by := getS(it, aJob)
			g, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
				TableName: &s.table, Key: key(jobPK(by), jobSK), ConsistentRead: aws.Bool(true),
				ProjectionExpression: aws.String("pk, " + aDeleting + ", " + aDataDeleted),
			})
			if err != nil {
				return 0, nil, fmt.Errorf("read job %s reusing job %s: %w", by, job, err)
			}
			if g.Item != nil && g.Item[aDeleting] == nil && g.Item[aDataDeleted] == nil {
				living = append(living, by)
			}
		}
		if len(q.LastEvaluatedKey) == 0 {
			return ver, living, nil
		}
		start = q.LastEvaluatedKey
	}
}

// reuseGuard refuses to mark job deleted (or data-deleted) while a rerun
// reusing its outputs lives, and otherwise returns the condition that no
// rerun linked itself since (to AND with the mark's), adding its value to
// vals.
func (s *Store) reuseGuard(ctx context.Context, job string, vals map[string]types.AttributeValue) (string, int64, error) {
	ver, living, err := s.JobReusedBy(ctx, job)
	if err != nil {
		return "", 0, err
	}
	if len(living) > 0 {
		return "", 0, &domain.ReusedError{ID: job, By: living}
	}
	if ver == 0 {
		return " AND attribute_not_exists(" + aReuseVer + ")", 0, nil
	}
	vals[":rbv"] = nv(ver)
	return " AND " + aReuseVer + " = :rbv", ver, nil
}

// reuseRaced says, after a mark's condition failed, whether a rerun
// linked itself to job since the guard read version ver (the caller
// tries again), or answers the refusal if that rerun lives.
func (s *Store) reuseRaced(ctx context.Context, job string, ver int64) (bool, error) {
	now, living, err := s.JobReusedBy(ctx, job)
	if err != nil {
		return false, err
	}
	if len(living) > 0 {
		return false, &domain.ReusedError{ID: job, By: living}
	}
	return now != ver, nil
}

// reuseLinkKeys are the keys of the links job, a rerun, made to its
// sources.
func (s *Store) reuseLinkKeys(ctx context.Context, job string) ([]map[string]types.AttributeValue, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(job), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String(aReused),
	})
	if err != nil {
		return nil, fmt.Errorf("read the sources of job %s: %w", job, err)
	}
	var srcs []string
	for _, src := range decodeReused(out.Item) {
		if !slices.Contains(srcs, src) {
			srcs = append(srcs, src)
		}
	}
	slices.Sort(srcs)
	keys := make([]map[string]types.AttributeValue, len(srcs))
	for i, src := range srcs {
		keys[i] = key(jobPK(src), reusedBySK(job))
	}
	return keys, nil
}
