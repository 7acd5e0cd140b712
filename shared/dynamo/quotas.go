package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An owner's quota counters are one item next to its job index,
// OWN#<owner hash>/QUOTA: active jobs, the tasks they declared, and
// schedules. Each change is part of the transaction that creates or ends
// what it counts, with a condition that keeps the count within its quota,
// so a count never drifts from what exists.
const (
	quotaSK     = "QUOTA"
	quotaJobs   = "aj"
	quotaTasks  = "qt"
	quotaScheds = "ns"
	aQuotaTasks = "qn" // on a job: the tasks it counts in its owner's quota
)

// ErrQuotaReached means a quota counter is at its limit; nothing of the
// request was written.
var ErrQuotaReached = errors.New("owner quota reached")

// quotaUpdate adds to one or two counters of owner's quota item (pairs of
// counter, delta, max), on the condition that each one with a max stays
// within it. A max of 0 is no limit; a negative delta is never refused.
func quotaUpdate(table, owner string, pairs ...any) types.TransactWriteItem {
	var adds, conds []string
	names := map[string]string{}
	vals := map[string]types.AttributeValue{}
	for i := 0; i+2 < len(pairs); i += 3 {
		attr, delta, limit := pairs[i].(string), pairs[i+1].(int), pairs[i+2].(int)
		n, d, m := "#c"+attr, ":d"+attr, ":m"+attr
		names[n] = attr
		vals[d] = nv(int64(delta))
		adds = append(adds, n+" "+d)
		if limit > 0 && delta > 0 {
			vals[m] = nv(int64(limit - delta))
			conds = append(conds, "(attribute_not_exists("+n+") OR "+n+" <= "+m+")")
		}
	}
	u := &types.Update{
		TableName: &table, Key: key(ownerPK(owner), quotaSK),
		UpdateExpression:          aws.String("ADD " + strings.Join(adds, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	}
	if len(conds) > 0 {
		u.ConditionExpression = aws.String(strings.Join(conds, " AND "))
	}
	return types.TransactWriteItem{Update: u}
}

// QuotaUse is an owner's counted use.
type QuotaUse struct {
	ActiveJobs, Tasks, Schedules int
}

// QuotaUse reads owner's quota counters consistently (zero if none).
func (s *Store) OwnerQuotaUse(ctx context.Context, owner string) (QuotaUse, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: key(ownerPK(owner), quotaSK), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return QuotaUse{}, fmt.Errorf("read quota use: %w", err)
	}
	return QuotaUse{
		ActiveJobs: int(getN(out.Item, quotaJobs)), Tasks: int(getN(out.Item, quotaTasks)),
		Schedules: int(getN(out.Item, quotaScheds)),
	}, nil
}
