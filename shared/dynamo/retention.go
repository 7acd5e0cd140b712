package dynamo

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Retention: an installation may keep ended jobs for a while only
// (lambdaenv.EnvRetentionDays; the construct's Retention). EndJob then
// puts the job item in the sweep index at the job's end plus the
// retention, when the sweep deletes every record of the job
// (control.Service.expireJob, with the steps of a DELETE), and gives the
// records it writes (the job item, its owner index entry and its state
// copies) a TTL ExpiryGrace later, in the table's TTL attribute, as a
// backstop should the sweep not get there: DynamoDB deletes an expired
// item in the background, typically within 48 hours of its expiry (AWS
// promises no bound), and a read until then still returns it. The TTL is
// later than the sweep's turn, since once DynamoDB deletes the job item
// its sweep index entry goes with it, and nothing would find the job's
// other records.

// ExpiryGrace is how long after its sweep turn a job's own records
// expire through their TTL.
const ExpiryGrace = 24 * time.Hour

// SetRetention makes EndJob schedule the job's deletion at its end plus
// d, and give the records it writes a TTL ExpiryGrace later; zero (the
// default) keeps them.
func (s *Store) JobSetRetention(d time.Duration) { s.retention = max(d, 0) }

// expiry is the TTL value of a record of a job ended at end, or nil when
// records are kept.
func (s *Store) expiry(end time.Time) types.AttributeValue {
	if s.retention <= 0 {
		return nil
	}
	return nv(end.Add(s.retention + ExpiryGrace).Unix())
}

// expiryDue is the end of EndJob's update of the job item: out of the
// sweep index when jobs are kept, in it at the end plus the retention
// otherwise.
func (s *Store) expiryDue(c *cond, job string, end time.Time) string {
	if s.retention <= 0 {
		return " REMOVE gpk, due"
	}
	c.values[":gpk"] = sv(duePK(jobPK(job) + jobSK))
	c.values[":due"] = ms(end.Add(s.retention))
	return ", gpk = :gpk, due = :due"
}

// withExpiry adds the TTL to an item written when a job ends.
func (s *Store) withExpiry(item map[string]types.AttributeValue, end time.Time) map[string]types.AttributeValue {
	if ttl := s.expiry(end); ttl != nil {
		item = maps.Clone(item)
		item[aTTL] = ttl
	}
	return item
}

// expiring adds the TTL to the Put parts of items.
func (s *Store) expiring(items []types.TransactWriteItem, end time.Time) []types.TransactWriteItem {
	for i := range items {
		if p := items[i].Put; p != nil {
			p.Item = s.withExpiry(p.Item, end)
		}
	}
	return items
}

// PostponeExpiry moves an ended job's expiry to until (a rerun reuses its
// outputs, control.Service.expireJob): its turn in the sweep, and the TTL
// of the records EndJob gave one (the job item, its owner-list entry, its
// state copies) to until plus ExpiryGrace, in one transaction. Moving the
// turn alone would let DynamoDB delete those records at the TTL the job's
// end set, and the rest of the job with nothing left to find it by. The
// transaction holds while the job is ended and not being deleted, and
// each TTL is moved only from the value read here and only later: a
// concurrent postponement or deletion cancels it (an error; the sweep
// looks at the job again). sm.ErrInvalidTransition: the job is gone, not
// ended or being deleted.
func (s *Store) JobPostponeExpiry(ctx context.Context, job, owner string, until time.Time) error {
	ttl := until.Add(ExpiryGrace).Unix()
	head := key(jobPK(job), jobSK)
	others := []map[string]types.AttributeValue{key(ownerPK(owner), ownerJobSK(job))}
	for k := range JobStateShards {
		others = append(others, key(jobStatePK(job, k), jobStateSK))
	}
	cur, err := s.ttls(ctx, append([]map[string]types.AttributeValue{head}, others...))
	if err != nil {
		return fmt.Errorf("postpone expiry of job %s: %w", job, err)
	}
	c := newCond()
	ended := make([]string, len(sm.Jobs.Terminal))
	for i, st := range sm.Jobs.Terminal {
		ph := ":s_" + string(st)
		c.values[ph] = sv(string(st))
		ended[i] = ph
	}
	names := map[string]string{"#st": aState}
	upd := "SET" + s.dueClause(c, jobPK(job)+jobSK, until)[1:]
	if old, ok := cur[keyString(head)]; ok && old < ttl {
		names["#ttl"] = aTTL // a reserved word
		c.values[":ttl"], c.values[":old"] = nv(ttl), nv(old)
		upd += ", #ttl = :ttl"
	}
	guard := "attribute_exists(pk) AND attribute_not_exists(" + aDeleting + ") AND #st IN (" + strings.Join(ended, ", ") + ")"
	if _, ok := c.values[":old"]; ok {
		guard += " AND #ttl = :old"
	}
	items := []types.TransactWriteItem{{Update: &types.Update{
		TableName: &s.table, Key: head, UpdateExpression: aws.String(upd), ConditionExpression: aws.String(guard),
		ExpressionAttributeNames: names, ExpressionAttributeValues: c.values,
	}}}
	for _, k := range others {
		old, ok := cur[keyString(k)]
		if !ok || old >= ttl {
			continue // no record, no TTL, or one late enough
		}
		items = append(items, types.TransactWriteItem{Update: &types.Update{
			TableName: &s.table, Key: k,
			UpdateExpression:          aws.String("SET #ttl = :ttl"),
			ConditionExpression:       aws.String("#ttl = :old"),
			ExpressionAttributeNames:  map[string]string{"#ttl": aTTL},
			ExpressionAttributeValues: map[string]types.AttributeValue{":ttl": nv(ttl), ":old": nv(old)},
		}})
	}
	err = s.transact(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if r := cancelReasons(err); len(r) > 0 && r[0] == reasonCondFailed {
		return fmt.Errorf("postpone expiry of job %s: %w", job, sm.ErrInvalidTransition)
	}
	if err != nil {
		return fmt.Errorf("postpone expiry of job %s: %w", job, err)
	}
	return nil
}

// ttls reads the TTL of each of keys' items that exists and has one, by
// keyString.
func (s *Store) ttls(ctx context.Context, keys []map[string]types.AttributeValue) (map[string]int64, error) {
	out := map[string]int64{}
	for try := 0; len(keys) > 0; try++ {
		if try > 0 {
			// Unprocessed keys come back under throttling: back off
			// rather than spin.
			if err := backoff(ctx, try); err != nil {
				return nil, fmt.Errorf("read ttls: %w", err)
			}
		}
		res, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("pk, sk, #ttl"),
				ExpressionAttributeNames: map[string]string{"#ttl": aTTL}},
		}})
		if err != nil {
			return nil, fmt.Errorf("read ttls: %w", err)
		}
		for _, it := range res.Responses[s.table] {
			if v, ok := it[aTTL].(*types.AttributeValueMemberN); ok {
				n, err := strconv.ParseInt(v.Value, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("read ttls: %s %s: ttl %q: %w", getS(it, attrPK), getS(it, attrSK), v.Value, err)
				}
				out[keyString(key(getS(it, attrPK), getS(it, attrSK)))] = n
			}
		}
		keys = res.UnprocessedKeys[s.table].Keys
	}
	return out, nil
}

func keyString(k map[string]types.AttributeValue) string {
	pk, _ := k[attrPK].(*types.AttributeValueMemberS)
	sk, _ := k[attrSK].(*types.AttributeValueMemberS)
	if pk == nil || sk == nil {
		return ""
	}
	return pk.Value + " " + sk.Value
}
