package dynamo

import (
	"maps"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
func (s *Store) SetRetention(d time.Duration) { s.retention = max(d, 0) }

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
