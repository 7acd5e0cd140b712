package sweepshare

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/batchwork/batchwork/internal/loadmodel"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A job is charged the walks a deployed schedule makes over its time, in
// place of the walks counted; every other request, the index's writes
// among them, stays charged in full.
func TestShareChargesTheWalkProRata(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		walks         int // sweep runs counted
		job, interval time.Duration
		wantCharged   float64 // of the walk
	}{
		{"a short job, one settling walk", 1, 6 * time.Second, time.Minute, 6.5},
		{"a short job, a ticker's walk too", 2, 6 * time.Second, time.Minute, 6.5},
		{"a job of two periods", 1, 2 * time.Minute, time.Minute, 130},
		{"no interval: the walks as counted", 2, 6 * time.Second, 0, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &loadmodel.Recorder{}
			rec.SetTable("t", loadmodel.Table{PK: "pk", SK: "sk", Indexes: map[string]string{dynamo.DueIndex: "gpk"}})
			// A walk at its most: the Scan that found the index large,
			// then a Query per shard.
			for range tc.walks {
				rec.Record("DynamoDB", "Scan", &dynamodb.ScanInput{TableName: aws.String("t"), IndexName: aws.String(dynamo.DueIndex)}, &dynamodb.ScanOutput{}, nil)
				for shard := range dynamo.DueShards {
					rec.Record("DynamoDB", "Query", &dynamodb.QueryInput{TableName: aws.String("t"), IndexName: aws.String(dynamo.DueIndex),
						KeyConditionExpression:    aws.String("gpk = :g AND due <= :now"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":g": &types.AttributeValueMemberS{Value: fmt.Sprintf("D#%d", shard)}, ":now": &types.AttributeValueMemberN{Value: "1"}},
					}, &dynamodb.QueryOutput{}, nil)
				}
			}
			const others = 100
			for i := range others {
				rec.Record("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String("t"),
					Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint(i)}, "sk": &types.AttributeValueMemberS{Value: "s"}}}, &dynamodb.UpdateItemOutput{}, nil)
			}
			snap := rec.Snapshot()
			// An item's write to the index touches its key as a write.
			k := loadmodel.Key{Service: "DynamoDB", Resource: "t/" + dynamo.DueIndex, Key: "D#3"}
			st := snap.Keys[k]
			st.Requests, st.Writes = st.Requests+5, st.Writes+5
			snap.Keys[k] = st
			sh := Of(snap, tc.job, tc.interval)
			walked := tc.walks * (dynamo.DueShards + 1)
			if sh.Whole != walked+others || sh.Walk != walked {
				t.Fatalf("counted %d requests, %d of them the walk; want %d and %d", sh.Whole, sh.Walk, walked+others, walked)
			}
			if got := sh.WalkCharged(); math.Abs(got-tc.wantCharged) > 1e-9 {
				t.Fatalf("walk charged %v, want %v", got, tc.wantCharged)
			}
			if got, want := sh.Charged(), others+tc.wantCharged; math.Abs(got-want) > 1e-9 {
				t.Fatalf("charged %v, want %v", got, want)
			}
		})
	}
}
