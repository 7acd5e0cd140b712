package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/schedule"
)

// Shard leases of the schedule index (schedule.ShardLease), one item per
// shard in one partition, so one Query reads them all:
//
//	SCHS                 <nn>          shard nn's lease (owner run, expiry) and watermark
//
// Each condition here is the DynamoDB form of a schedule.ShardLease rule:
// a take is TakeableBy, an advance is HeldBy and the watermark as read.

const shardsPK = "SCHS"

func shardSK(shard int) string { return fmt.Sprintf("%02d", shard) }

const (
	aLeaseOwner = "lo" // the run holding the lease
	aLeaseUntil = "lx" // lease expiry, Unix ms
)

var (
	// ErrShardLeased: another run holds the shard's lease.
	ErrShardLeased = errors.New("schedule shard leased by another run")
	// ErrShardLost: the run no longer holds the shard (its lease expired
	// and may have been taken over), or the watermark moved; nothing was
	// written.
	ErrShardLost = errors.New("schedule shard lease lost")
)

func decodeShard(item map[string]types.AttributeValue) schedule.ShardLease {
	n, _ := strconv.Atoi(getS(item, attrSK))
	return schedule.ShardLease{Shard: n, Owner: getS(item, aLeaseOwner), Expires: getT(item, aLeaseUntil), Watermark: getT(item, aWater)}
}

// ScheduleShardTake takes (or renews) shard's lease for run until `until`,
// if no other run holds it at now, and returns the shard as it now is
// (its watermark included); else ErrShardLeased. The item is created by
// the first take.
func (s *Store) ScheduleShardTake(ctx context.Context, shard int, run string, now, until time.Time) (schedule.ShardLease, error) {
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(shardsPK, shardSK(shard)),
		ConditionExpression: aws.String("attribute_not_exists(pk) OR lo = :run OR lx <= :now"),
		UpdateExpression:    aws.String("SET lo = :run, lx = :until"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":run": sv(run), ":now": ms(now), ":until": ms(until),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isCondFailed(err) {
		return schedule.ShardLease{}, fmt.Errorf("take schedule shard %d: %w", shard, ErrShardLeased)
	}
	if err != nil {
		return schedule.ShardLease{}, fmt.Errorf("take schedule shard %d: %w", shard, err)
	}
	return decodeShard(out.Attributes), nil
}

// ScheduleShardAdvance moves shard's watermark from old (zero: the shard
// has none yet) to `to`, only while run holds the lease at now and the
// watermark is still old; else ErrShardLost and nothing changes.
func (s *Store) ScheduleShardAdvance(ctx context.Context, shard int, run string, old, to, now time.Time) error {
	cond := "lo = :run AND lx > :now AND "
	vals := map[string]types.AttributeValue{":run": sv(run), ":now": ms(now), ":to": ms(to)}
	if old.IsZero() {
		cond += "attribute_not_exists(wm)"
	} else {
		cond += "wm = :old"
		vals[":old"] = ms(old)
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(shardsPK, shardSK(shard)),
		ConditionExpression: &cond, UpdateExpression: aws.String("SET wm = :to"),
		ExpressionAttributeValues: vals,
	})
	if isCondFailed(err) {
		return fmt.Errorf("advance schedule shard %d: %w", shard, ErrShardLost)
	}
	if err != nil {
		return fmt.Errorf("advance schedule shard %d: %w", shard, err)
	}
	return nil
}

// ScheduleShardRelease ends run's hold on shard (its expiry set to the
// epoch), so the next run need not wait for it; a lease run no longer
// holds is left alone.
func (s *Store) ScheduleShardRelease(ctx context.Context, shard int, run string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(shardsPK, shardSK(shard)),
		ConditionExpression: aws.String("lo = :run"), UpdateExpression: aws.String("SET lx = :zero"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":run": sv(run), ":zero": nv(0)},
	})
	if err != nil && !isCondFailed(err) {
		return fmt.Errorf("release schedule shard %d: %w", shard, err)
	}
	return nil
}

// ScheduleShards reads every shard's lease that was ever taken, by shard.
func (s *Store) ScheduleShards(ctx context.Context) ([]schedule.ShardLease, error) {
	out, err := s.db.Query(ctx, &dynamodb.QueryInput{
		TableName: &s.table, KeyConditionExpression: aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": sv(shardsPK)},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("read schedule shards: %w", err)
	}
	ls := make([]schedule.ShardLease, 0, len(out.Items))
	for _, it := range out.Items {
		ls = append(ls, decodeShard(it))
	}
	return ls, nil
}
