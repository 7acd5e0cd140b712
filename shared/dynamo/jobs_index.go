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

// ownerIndexItem is a job's entry in its owner's job index. CreateJob and
// EndJob write it in the same transaction as the job record.
func ownerIndexItem(owner, job, name string, state sm.JobState, created, ended time.Time) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		attrPK: sv(ownerPK(owner)), attrSK: sv(ownerJobSK(job)),
		aName: sv(name), aState: sv(string(state)), aCreated: ms(created),
	}
	if !ended.IsZero() {
		it[aEnded] = ms(ended)
	}
	return it
}

type jobHeader struct {
	Owner, Name string
	Created     time.Time
	// Quota says the job counts against its owner's quotas, with
	// QuotaTasks tasks.
	Quota      bool
	QuotaTasks int
	// Redrives is how many times the job was redriven (redrive.go): its
	// ended event's id names it (events.JobEndedID).
	Redrives int
	// State is the job's state when the head was read (it moves; the
	// fields above do not).
	State sm.JobState
}

// jobHead reads the immutable fields of a job that its index item repeats.
func (s *Store) jobHead(ctx context.Context, id string) (jobHeader, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(jobPK(id), jobSK), ConsistentRead: aws.Bool(true),
		ProjectionExpression:     aws.String("#own, #nm, #crt, #qt, #rdl, #st"),
		ExpressionAttributeNames: map[string]string{"#own": aOwner, "#nm": aName, "#crt": aCreated, "#qt": aQuotaTasks, "#rdl": aRedrives, "#st": aState},
	})
	if err != nil {
		return jobHeader{}, fmt.Errorf("read job %s: %w", id, err)
	}
	if out.Item == nil {
		return jobHeader{}, fmt.Errorf("read job %s: %w", id, domain.ErrNotFound)
	}
	_, quota := out.Item[aQuotaTasks]
	return jobHeader{Owner: getS(out.Item, aOwner), Name: getS(out.Item, aName), Created: getT(out.Item, aCreated),
		Quota: quota, QuotaTasks: int(getN(out.Item, aQuotaTasks)), Redrives: len(decodeRedrives(out.Item)), State: sm.JobState(getS(out.Item, aState))}, nil
}

// ListJobsParams selects a page of an owner's jobs, newest first.
type ListJobsParams struct {
	Owner string
	// State and Name, when set, keep only jobs with that status or name.
	State sm.JobState
	Name  string
	// After is the id of the last job of the previous page.
	After string
	Limit int
	// MaxReads bounds the Queries one page may take when filters are
	// sparse; the page then comes back short, with a cursor.
	MaxReads int
}

// ListOwnerJobs returns up to p.Limit of the owner's jobs, newest first,
// and the id to continue after ("" at the end). The index is read
// consistently, so a job is listed as soon as its submission returns.
func (s *Store) JobListByOwner(ctx context.Context, p ListJobsParams) ([]domain.JobSummary, string, error) {
	in := &dynamodb.QueryInput{
		TableName:              &s.table,
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :pre)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sv(ownerPK(p.Owner)), ":pre": sv("JOB#"),
		},
		ScanIndexForward: aws.Bool(false),
		ConsistentRead:   aws.Bool(true),
	}
	var filters []string
	if p.State != "" {
		filters = append(filters, "#st = :st")
		in.ExpressionAttributeNames = map[string]string{"#st": aState}
		in.ExpressionAttributeValues[":st"] = sv(string(p.State))
	}
	if p.Name != "" {
		filters = append(filters, "nm = :nm")
		in.ExpressionAttributeValues[":nm"] = sv(p.Name)
	}
	if len(filters) > 0 {
		in.FilterExpression = aws.String(strings.Join(filters, " AND "))
	}
	if p.After != "" {
		in.ExclusiveStartKey = key(ownerPK(p.Owner), ownerJobSK(p.After))
	}
	var jobs []domain.JobSummary
	for reads := 0; len(jobs) < p.Limit && reads < max(p.MaxReads, 1); reads++ {
		// Each Query evaluates no more items than the page still needs, so
		// the last evaluated key is always a valid place to continue.
		in.Limit = aws.Int32(int32(p.Limit - len(jobs)))
		out, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, "", fmt.Errorf("list jobs of %s: %w", p.Owner, err)
		}
		for _, it := range out.Items {
			jobs = append(jobs, domain.JobSummary{
				ID: strings.TrimPrefix(getS(it, attrSK), "JOB#"), Name: getS(it, aName),
				State: sm.JobState(getS(it, aState)), Created: getT(it, aCreated), Ended: getT(it, aEnded),
			})
		}
		if out.LastEvaluatedKey == nil {
			return jobs, "", nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
	return jobs, strings.TrimPrefix(getS(in.ExclusiveStartKey, attrSK), "JOB#"), nil
}
