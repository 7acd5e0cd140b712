package integration

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// A job whose outputs a rerun reuses has its expiry postponed, and its
// TTL backstop moves with it: after a postponement every record that
// EndJob gave a TTL (the job item, its owner-list entry, its state
// copies) expires ExpiryGrace after the job's new turn in the sweep, not
// at the TTL its end set, which DynamoDB would reach while the rerun
// still stands on the job's records.
func TestPostponedExpiryMovesTheTTL(t *testing.T) {
	t.Parallel()
	const retention = time.Hour
	cfg := testTimings
	cfg.Retention = retention
	rig := newSweepRig(t, cfg)
	e := rig.e
	ctx := context.Background()
	db := dynamodb.NewFromConfig(e.cfg)
	store := dynamo.New(db, e.r.Resources.Table)
	store.JobSetRetention(retention)
	svc := rig.service(store, e.r.Queue)
	exec := rig.executor(svc)
	orig := submitTo(t, svc, "orig", `{"name":"ret","deadline":"10m","stages":[
		{"name":"a","task":"work","partitions":{"count":2},"shuffle":{"partitions":2}},
		{"name":"b","task":"work","after":["a"]}]}`)
	work(t, e, exec)
	wantSucceeded(t, svc, orig)
	rig.clk.Advance(retention / 2)
	res, err := svc.Rerun(ctx, control.RerunRequest{Owner: "tester", ID: orig, From: "b"})
	if err != nil {
		t.Fatal(err)
	}
	work(t, e, exec)
	wantSucceeded(t, svc, res.JobID)

	item := func(k string) map[string]types.AttributeValue {
		pk, sk := k[:indexOf(k, ' ')], k[indexOf(k, ' ')+1:]
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: &e.r.Resources.Table, ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}, "sk": &types.AttributeValueMemberS{Value: sk}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.Item
	}
	num := func(it map[string]types.AttributeValue, attr string) int64 {
		v, ok := it[attr].(*types.AttributeValueMemberN)
		if !ok {
			return 0
		}
		n, err := strconv.ParseInt(v.Value, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	rig.clk.Advance(retention/2 + time.Second) // the original's turn
	for range 3 {
		mustSweep(t, svc)
	}
	if len(recordsOf(t, e, orig)) == 0 {
		t.Fatal("the original expired while its rerun, reusing its outputs, lives")
	}
	due := time.UnixMilli(num(item("JOB#"+orig+" JOB"), dynamo.Schema.Due))
	if !due.After(rig.clk.Now()) {
		t.Fatalf("the original's next turn %v is not after now %v: not postponed", due, rig.clk.Now())
	}
	want := due.Add(dynamo.ExpiryGrace).Unix()
	var withTTL []string
	for _, k := range recordsOf(t, e, orig) {
		if k[:indexOf(k, '#')] == "IDEM" {
			continue // its own ttl, from its creation
		}
		ttl := num(item(k), dynamo.Schema.TTL)
		if ttl == 0 {
			continue
		}
		withTTL = append(withTTL, k)
		if ttl < want {
			t.Errorf("%s expires at %v, before the postponed turn %v and the grace (%v)",
				k, time.Unix(ttl, 0).UTC(), due.UTC(), time.Unix(want, 0).UTC())
		}
	}
	if kinds := kindsOf(withTTL); !slices.Equal(kinds, []string{"JOB JOB", "JST", "OWN"}) || len(withTTL) != 2+dynamo.JobStateShards {
		t.Errorf("records with a ttl: %v, want the job item, its list entry and its %d state copies", withTTL, dynamo.JobStateShards)
	}
}
