package dynamo

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/shared/cost"
)

// A job's cost (shared/cost) rides on its counts: each count write on a
// stage's counter shard adds the counts its committer's process gathered
// for the job since its last one (CommitParams.Cost), in the same
// conditional write. So the counts inherit the count's guard: a retried or
// duplicate commit, refused by the shard's set of counted partitions,
// adds nothing twice, and no new condition can refuse a commit. Status
// sums the shards' counts (StageStats).

// costAttr is the counter shard's attribute a cost count is kept under.
func costAttr(field string) string { return "c_" + field }

// costUpdate adds c's counts to an update expression's ADD clause (upd
// starts with "ADD ..."), binding their values in vals.
func costUpdate(upd string, c cost.Counts, vals map[string]types.AttributeValue) string {
	for i, f := range c.Fields() {
		v := cost.Round(*f.Value)
		if v == 0 {
			continue
		}
		name := ":c" + strconv.Itoa(i)
		vals[name] = &types.AttributeValueMemberN{Value: strconv.FormatFloat(v, 'f', -1, 64)}
		upd += ", " + costAttr(f.Name) + " " + name
	}
	return upd
}

// readCost reads the cost counts of a counter shard's item.
func readCost(item map[string]types.AttributeValue) cost.Counts {
	var c cost.Counts
	for _, f := range c.Fields() {
		if n, ok := item[costAttr(f.Name)].(*types.AttributeValueMemberN); ok {
			*f.Value, _ = strconv.ParseFloat(n.Value, 64)
		}
	}
	return c
}

// ShardAddCost adds a process's pending counts for a job to one of its
// stage's counter shards, outside any count: the requests a stage's
// completion made after the committer's last count (its manifests, the
// stages after it, the job's end). flush names the write: a retry of a
// write whose answer was lost is refused by the set of names the shard
// keeps, so it adds nothing twice; a missing counter (the job's records
// are being deleted) takes nothing.
func (s *Store) ShardAddCost(ctx context.Context, job string, stage, shard int, flush string, c cost.Counts) error {
	vals := map[string]types.AttributeValue{":f": &types.AttributeValueMemberSS{Value: []string{flush}}, ":fs": &types.AttributeValueMemberS{Value: flush}}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: key(shardPK(job, stage, shard), cntSK),
		ConditionExpression:       aws.String("attribute_exists(pk) AND NOT contains(" + aCostFlushes + ", :fs)"),
		UpdateExpression:          aws.String(costUpdate("ADD "+aCostFlushes+" :f", c, vals)),
		ExpressionAttributeValues: vals,
	})
	if isCondFailed(err) {
		return nil // added already, or no counter
	}
	if err != nil {
		return fmt.Errorf("add cost to counter %d of stage %s/%d: %w", shard, job, stage, err)
	}
	return nil
}

// aCostFlushes is the counter shard's set of the ShardAddCost writes it
// took.
const aCostFlushes = "cflush"
