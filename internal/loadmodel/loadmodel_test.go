package loadmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/dynamo"
)

func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v string) types.AttributeValue { return &types.AttributeValueMemberN{Value: v} }

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": s(pk), "sk": s(sk)}
}

// item is a key plus a string attribute "v" that makes the item size
// bytes in all ("pk"+pk, "sk"+sk, "v"+value).
func item(pk, sk string, size int) map[string]types.AttributeValue {
	it := key(pk, sk)
	it["v"] = s(strings.Repeat("x", size-len("pk")-len(pk)-len("sk")-len(sk)-len("v")))
	return it
}

func TestItemSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		item map[string]types.AttributeValue
		want int
	}{
		{"strings", map[string]types.AttributeValue{"pk": s("JOB#1"), "sk": s("JOB")}, 2 + 5 + 2 + 3},
		{"number: two digits a byte, plus one", map[string]types.AttributeValue{"n": n("12345")}, 1 + 3 + 1},
		{"number: zeros do not count", map[string]types.AttributeValue{"n": n("-1000")}, 1 + 1 + 1},
		{"number: decimal", map[string]types.AttributeValue{"n": n("0.50")}, 1 + 1 + 1},
		{"binary and bool", map[string]types.AttributeValue{"b": &types.AttributeValueMemberB{Value: []byte{1, 2, 3}},
			"t": &types.AttributeValueMemberBOOL{Value: true}, "z": &types.AttributeValueMemberNULL{Value: true}}, 1 + 3 + 1 + 1 + 1 + 1},
		{"list: 3 bytes plus one per element", map[string]types.AttributeValue{"l": &types.AttributeValueMemberL{Value: []types.AttributeValue{s("ab"), s("c")}}},
			1 + 3 + (1 + 2) + (1 + 1)},
		{"map: names count", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": s("v")}}},
			1 + 3 + 1 + 1 + 1},
		{"string set", map[string]types.AttributeValue{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "bc"}}}, 2 + 3},
		{"sized helper", item("JOB#1", "JOB", 3000), 3000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := ItemSize(c.item); got != c.want {
				t.Errorf("ItemSize = %d, want %d", got, c.want)
			}
		})
	}
}

func TestUnits(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"write 1 byte", WriteUnits(1, false), 1},
		{"write 1 KB", WriteUnits(1024, false), 1},
		{"write 1 KB + 1", WriteUnits(1025, false), 2},
		{"write 256 KiB", WriteUnits(256<<10, false), 256},
		{"transactional write doubles", WriteUnits(1500, true), 4},
		{"write of nothing is still a unit", WriteUnits(0, false), 1},
		{"consistent read 4 KB", ReadUnits(4096, true, false), 1},
		{"consistent read 4 KB + 1", ReadUnits(4097, true, false), 2},
		{"eventual read halves", ReadUnits(4097, false, false), 1},
		{"eventual small read", ReadUnits(100, false, false), 0.5},
		{"transactional read doubles", ReadUnits(100, true, true), 2},
		{"consistent read of 256 KiB", ReadUnits(256<<10, true, false), 64},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: %v units, want %v", c.name, c.got, c.want)
		}
	}
}

// keyStats is the snapshot's DynamoDB keys, for comparison.
func keyStats(snap Snapshot, service string) map[string]KeyStat {
	m := map[string]KeyStat{}
	for k, v := range snap.Keys {
		if k.Service == service {
			m[k.Resource+" "+k.Key] = v
		}
	}
	return m
}

// Without ConsumedCapacity in the answers the units come from the sizes;
// each operation's keys are found in its input.
func TestDynamoKeysAndEstimates(t *testing.T) {
	t.Parallel()
	tbl := aws.String("tbl")
	cases := []struct {
		name     string
		op       string
		in, out  any
		err      error
		want     map[string]KeyStat
		rcu, wcu float64
	}{
		{
			name: "GetItem consistent, sized by the answer", op: "GetItem",
			in:   &dynamodb.GetItemInput{TableName: tbl, Key: key("JOB#1", "JOB"), ConsistentRead: aws.Bool(true)},
			out:  &dynamodb.GetItemOutput{Item: item("JOB#1", "JOB", 9000)},
			want: map[string]KeyStat{"tbl JOB#1": {Requests: 1, Reads: 1, RCU: 3}}, rcu: 3,
		},
		{
			name: "GetItem eventually consistent", op: "GetItem",
			in:   &dynamodb.GetItemInput{TableName: tbl, Key: key("JOB#1", "JOB")},
			out:  &dynamodb.GetItemOutput{Item: item("JOB#1", "JOB", 100)},
			want: map[string]KeyStat{"tbl JOB#1": {Requests: 1, Reads: 1, RCU: 0.5}}, rcu: 0.5,
		},
		{
			name: "PutItem", op: "PutItem",
			in:   &dynamodb.PutItemInput{TableName: tbl, Item: item("TASK#j#0#0", "000001", 2100)},
			out:  &dynamodb.PutItemOutput{},
			want: map[string]KeyStat{"tbl TASK#j#0#0": {Requests: 1, Writes: 1, WCU: 3}}, wcu: 3,
		},
		{
			name: "failed conditional put is billed", op: "PutItem",
			in:   &dynamodb.PutItemInput{TableName: tbl, Item: item("IDEM#o#k", "IDEM", 500)},
			err:  &types.ConditionalCheckFailedException{},
			want: map[string]KeyStat{"tbl IDEM#o#k": {Requests: 1, Writes: 1, WCU: 1}}, wcu: 1,
		},
		{
			name: "throttled request is not billed", op: "UpdateItem",
			in:   &dynamodb.UpdateItemInput{TableName: tbl, Key: key("CNT#j#0#1", "CNT"), UpdateExpression: aws.String("ADD n :one")},
			err:  errors.New("ThrottlingException"),
			want: map[string]KeyStat{"tbl CNT#j#0#1": {Requests: 1}},
		},
		{
			name: "UpdateItem", op: "UpdateItem",
			in: &dynamodb.UpdateItemInput{TableName: tbl, Key: key("TASK#j#0#3", "000300"), UpdateExpression: aws.String("SET #st = :st"),
				ExpressionAttributeNames: map[string]string{"#st": "status"}, ExpressionAttributeValues: map[string]types.AttributeValue{":st": s("LEASED")}},
			out:  &dynamodb.UpdateItemOutput{},
			want: map[string]KeyStat{"tbl TASK#j#0#3": {Requests: 1, Writes: 1, WCU: 1}}, wcu: 1,
		},
		{
			name: "DeleteItem", op: "DeleteItem",
			in:   &dynamodb.DeleteItemInput{TableName: tbl, Key: key("EXEC#e", "EXEC")},
			out:  &dynamodb.DeleteItemOutput{},
			want: map[string]KeyStat{"tbl EXEC#e": {Requests: 1, Writes: 1, WCU: 1}}, wcu: 1,
		},
		{
			name: "Query: one rounding over all items", op: "Query",
			in: &dynamodb.QueryInput{TableName: tbl, KeyConditionExpression: aws.String("#p = :p AND begins_with(sk, :s)"),
				ExpressionAttributeNames:  map[string]string{"#p": "pk"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":p": s("JOB#1"), ":s": s("STAGE#")}, ConsistentRead: aws.Bool(true)},
			out:  &dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{item("JOB#1", "STAGE#00", 3000), item("JOB#1", "STAGE#01", 3000)}},
			want: map[string]KeyStat{"tbl JOB#1": {Requests: 1, Reads: 1, RCU: 2}}, rcu: 2,
		},
		{
			name: "Query on an index: the index's partition", op: "Query",
			in: &dynamodb.QueryInput{TableName: tbl, IndexName: aws.String("due"), KeyConditionExpression: aws.String("gpk = :g AND due <= :now"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":g": s("D#3"), ":now": n("5")}},
			out:  &dynamodb.QueryOutput{},
			want: map[string]KeyStat{"tbl/due D#3": {Requests: 1, Reads: 1, RCU: 0.5}}, rcu: 0.5,
		},
		{
			name: "BatchGetItem: each item rounded", op: "BatchGetItem",
			in: &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{"tbl": {
				Keys: []map[string]types.AttributeValue{key("CNT#j#0#0", "CNT"), key("CNT#j#0#1", "CNT")}, ConsistentRead: aws.Bool(true)}}},
			out:  &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{"tbl": {item("CNT#j#0#0", "CNT", 5000), item("CNT#j#0#1", "CNT", 30)}}},
			want: map[string]KeyStat{"tbl CNT#j#0#0": {Requests: 1, Reads: 1, RCU: 2}, "tbl CNT#j#0#1": {Requests: 1, Reads: 1, RCU: 1}},
			rcu:  3,
		},
		{
			name: "BatchWriteItem", op: "BatchWriteItem",
			in: &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"tbl": {
				{PutRequest: &types.PutRequest{Item: item("ATT#j#0#0", "000001#001", 1500)}},
				{DeleteRequest: &types.DeleteRequest{Key: key("ATT#j#0#1", "000101#001")}}}}},
			out:  &dynamodb.BatchWriteItemOutput{},
			want: map[string]KeyStat{"tbl ATT#j#0#0": {Requests: 1, Writes: 1, WCU: 2}, "tbl ATT#j#0#1": {Requests: 1, Writes: 1, WCU: 1}},
			wcu:  3,
		},
		{
			name: "TransactWriteItems: each write doubled, condition checks are transactional reads", op: "TransactWriteItems",
			in: &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: tbl, Item: item("JOB#2", "JOB", 1500)}},
				{Update: &types.Update{TableName: tbl, Key: key("CNT#2#0#0", "CNT"), UpdateExpression: aws.String("ADD n :m")}},
				{Delete: &types.Delete{TableName: tbl, Key: key("EXEC#e", "EXEC")}},
				{ConditionCheck: &types.ConditionCheck{TableName: tbl, Key: key("OWN#o", "SLOTS"), ConditionExpression: aws.String("attribute_exists(pk)")}},
			}},
			out: &dynamodb.TransactWriteItemsOutput{},
			want: map[string]KeyStat{
				"tbl JOB#2": {Requests: 1, Writes: 1, WCU: 4}, "tbl CNT#2#0#0": {Requests: 1, Writes: 1, WCU: 2},
				"tbl EXEC#e": {Requests: 1, Writes: 1, WCU: 2}, "tbl OWN#o": {Requests: 1, Reads: 1, RCU: 2},
			},
			rcu: 2, wcu: 8,
		},
		{
			name: "TransactGetItems", op: "TransactGetItems",
			in:   &dynamodb.TransactGetItemsInput{TransactItems: []types.TransactGetItem{{Get: &types.Get{TableName: tbl, Key: key("JOB#1", "JOB")}}}},
			out:  &dynamodb.TransactGetItemsOutput{Responses: []types.ItemResponse{{Item: item("JOB#1", "JOB", 5000)}}},
			want: map[string]KeyStat{"tbl JOB#1": {Requests: 1, Reads: 1, RCU: 4}}, rcu: 4,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r Recorder
			r.SetTable("tbl", Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}})
			r.Record("DynamoDB", c.op, c.in, c.out, c.err)
			snap := r.Snapshot()
			if d := cmp.Diff(c.want, keyStats(snap, "DynamoDB")); d != "" {
				t.Errorf("keys (-want +got):\n%s", d)
			}
			op := snap.Ops["DynamoDB."+c.op]
			if op.Requests != 1 || op.RCU != c.rcu || op.WCU != c.wcu {
				t.Errorf("op %+v, want 1 request, %v RCU, %v WCU", op, c.rcu, c.wcu)
			}
		})
	}
}

func cc(table string, total float64, gsi map[string]float64) types.ConsumedCapacity {
	c := types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(total)}
	if gsi != nil {
		c.GlobalSecondaryIndexes = map[string]types.Capacity{}
		sum := 0.0
		for k, v := range gsi {
			c.GlobalSecondaryIndexes[k] = types.Capacity{CapacityUnits: aws.Float64(v)}
			sum += v
		}
		c.Table = &types.Capacity{CapacityUnits: aws.Float64(total - sum)}
	}
	return c
}

// With ConsumedCapacity, the reported figure wins; a transaction's figure
// is split over its items by their sizes, sizes the recorder saw before
// included; index units go to the items' index keys.
func TestDynamoReportedCapacity(t *testing.T) {
	t.Parallel()
	var r Recorder
	r.SetTable("tbl", Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}})
	tbl := aws.String("tbl")
	// A 9 KB job item read once: its size is remembered.
	r.Record("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: tbl, Key: key("JOB#1", "JOB"), ConsistentRead: aws.Bool(true)},
		&dynamodb.GetItemOutput{Item: item("JOB#1", "JOB", 9*1024), ConsumedCapacity: &types.ConsumedCapacity{TableName: tbl, CapacityUnits: aws.Float64(3)}}, nil)
	// A task put with an index key.
	task := item("TASK#1#0#0", "000001", 500)
	task["gpk"] = s("D#7")
	r.Record("DynamoDB", "PutItem", &dynamodb.PutItemInput{TableName: tbl, Item: task},
		&dynamodb.PutItemOutput{ConsumedCapacity: &[]types.ConsumedCapacity{cc("tbl", 2, map[string]float64{"due": 1})}[0]}, nil)
	// A transaction updating the job item (9 KB: 18 units) and removing
	// the task's index key (1 KB: 2 units), reported as 20 + 2 on the
	// index.
	r.Record("DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: tbl, Key: key("JOB#1", "JOB"), UpdateExpression: aws.String("SET n = :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": n("1")}}},
		{Update: &types.Update{TableName: tbl, Key: key("TASK#1#0#0", "000001"), UpdateExpression: aws.String("SET #st = :st REMOVE gpk, due"),
			ExpressionAttributeNames: map[string]string{"#st": "status"}, ExpressionAttributeValues: map[string]types.AttributeValue{":st": s("DONE")}}},
	}}, &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{cc("tbl", 22, map[string]float64{"due": 2})}}, nil)
	snap := r.Snapshot()
	want := map[string]KeyStat{
		"tbl JOB#1":      {Requests: 2, Reads: 1, Writes: 1, RCU: 3, WCU: 18},
		"tbl TASK#1#0#0": {Requests: 2, Writes: 2, WCU: 1 + 2},
		"tbl/due D#7":    {Requests: 2, Writes: 2, WCU: 1 + 2},
	}
	if d := cmp.Diff(want, keyStats(snap, "DynamoDB")); d != "" {
		t.Errorf("keys (-want +got):\n%s", d)
	}
	if snap.ReportedRCU != 3 || snap.ReportedWCU != 24 || snap.Estimated != 0 {
		t.Errorf("reported %v RCU, %v WCU, %d estimated; want 3, 24, 0", snap.ReportedRCU, snap.ReportedWCU, snap.Estimated)
	}
	if tot := snap.Totals(); tot.RCU != 3 || tot.WCU != 24 {
		t.Errorf("totals %v RCU, %v WCU; want 3, 24", tot.RCU, tot.WCU)
	}
}

func TestParseUpdate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		expr    string
		names   map[string]string
		set     map[string]string
		removed []string
	}{
		{"SET #st = :to, catt = :att, upd = :now REMOVE gpk, due, lease", map[string]string{"#st": "status"},
			map[string]string{"status": ":to", "catt": ":att", "upd": ":now"}, []string{"gpk", "due", "lease"}},
		{"set a = if_not_exists(a, :z), b = :b + :one, gpk = :gpk add n :one", nil, map[string]string{"gpk": ":gpk"}, nil},
		{"ADD n :one", nil, map[string]string{}, nil},
		{"SET m.k = :v REMOVE l[0]", nil, map[string]string{}, nil},
	}
	for _, c := range cases {
		set, removed := ParseUpdate(c.expr, c.names)
		if d := cmp.Diff(c.set, set); d != "" {
			t.Errorf("%q SET (-want +got):\n%s", c.expr, d)
		}
		if d := cmp.Diff(c.removed, removed); d != "" {
			t.Errorf("%q REMOVE (-want +got):\n%s", c.expr, d)
		}
	}
}

func TestS3AndSQS(t *testing.T) {
	t.Parallel()
	var r Recorder
	var sent []int
	r.OnSend = func(q string, n int, _ time.Time) { sent = append(sent, n) }
	b := aws.String("bkt")
	r.Record("S3", "PutObject", &s3.PutObjectInput{Bucket: b, Key: aws.String("jobs/j/out/map/p000001/a1/part-00000")}, &s3.PutObjectOutput{}, nil)
	r.Record("S3", "GetObject", &s3.GetObjectInput{Bucket: b, Key: aws.String("jobs/j/out/map/p000001/a1/part-00000")}, &s3.GetObjectOutput{}, nil)
	r.Record("S3", "ListObjectsV2", &s3.ListObjectsV2Input{Bucket: b, Prefix: aws.String("jobs/j/out/map/p000001/a1/")}, &s3.ListObjectsV2Output{}, nil)
	r.Record("S3", "DeleteObject", &s3.DeleteObjectInput{Bucket: b, Key: aws.String("top")}, &s3.DeleteObjectOutput{}, nil)
	q := aws.String("http://127.0.0.1:1/000000000000/bw-normal")
	big := strings.Repeat("x", 40<<10)
	r.Record("SQS", "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: q, Entries: []sqstypes.SendMessageBatchRequestEntry{
		{MessageBody: &big}, {MessageBody: &big}}}, &sqs.SendMessageBatchOutput{Successful: make([]sqstypes.SendMessageBatchResultEntry, 2)}, nil)
	r.Record("SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: q}, &sqs.ReceiveMessageOutput{}, nil)
	snap := r.Snapshot()
	want := map[string]KeyStat{
		"bkt jobs/j/out/map/p000001/a1/": {Requests: 3, Reads: 2, Writes: 1},
		"bkt ":                           {Requests: 1, Writes: 1},
	}
	if d := cmp.Diff(want, keyStats(snap, "S3")); d != "" {
		t.Errorf("S3 keys (-want +got):\n%s", d)
	}
	tot := snap.Totals()
	if tot.S3 != [3]int{1, 2, 1} {
		t.Errorf("S3 requests by tier (free, tier 1, tier 2) %v, want [1 2 1]", tot.S3)
	}
	// 80 KB in one batch is two billed requests, an empty receive one.
	if tot.Chunks != 3 || tot.Requests["SQS"] != 2 {
		t.Errorf("SQS %d requests billed as %d, want 2 as 3", tot.Requests["SQS"], tot.Chunks)
	}
	if snap.Sent["bw-normal"] != 2 || len(sent) != 1 || sent[0] != 2 {
		t.Errorf("sent %v, OnSend %v; want 2 to bw-normal in one call", snap.Sent, sent)
	}
	if d := cmp.Diff(map[string]KeyStat{"bw-normal ": {Requests: 2}}, keyStats(snap, "SQS")); d != "" {
		t.Errorf("SQS keys (-want +got):\n%s", d)
	}
}

// DynamoDB Local reports a transaction as 2 units for the table and 2 for
// each index it touches, whatever its number of items; AWS bills 2 units
// per KB of each item. A transaction is billed no less than those rules:
// 100 task puts with index entries are 200 units and 200 on the index,
// not 2 and 2.
func TestTransactionBilledNoLessThanItsItems(t *testing.T) {
	t.Parallel()
	var r Recorder
	r.SetTable("tbl", Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}})
	tbl := aws.String("tbl")
	var puts []types.TransactWriteItem
	for i := range 100 {
		it := item("TASK#1#0#0", fmt.Sprintf("%06d", i), 300)
		it["gpk"] = s(fmt.Sprintf("D#%d", i%4))
		puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: tbl, Item: it}})
	}
	r.Record("DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: puts},
		&dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{cc("tbl", 4, map[string]float64{"due": 2})}}, nil)
	// A commit: the task's entry removed, a counter counted down; reported
	// right (4 + 2), so kept.
	r.Record("DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: tbl, Key: key("TASK#1#0#0", "000001"), UpdateExpression: aws.String("SET #st = :st REMOVE gpk, due"),
			ExpressionAttributeNames: map[string]string{"#st": "status"}, ExpressionAttributeValues: map[string]types.AttributeValue{":st": s("DONE")}}},
		{Update: &types.Update{TableName: tbl, Key: key("CNT#1#0#0", "CNT"), UpdateExpression: aws.String("ADD l :m"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":m": n("-1")}}},
	}}, &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{cc("tbl", 6, map[string]float64{"due": 2})}}, nil)
	snap := r.Snapshot()
	ks := keyStats(snap, "DynamoDB")
	if got := ks["tbl TASK#1#0#0"].WCU; got != 200+2 {
		t.Errorf("task bucket: %v WCU, want 202 (100 puts at 2, the commit's update at 2)", got)
	}
	if got := ks["tbl/due D#1"].WCU; got != 50+2 {
		t.Errorf("index shard D#1: %v WCU, want 52 (25 entries put at 2, the commit's removal at 2)", got)
	}
	if tot := snap.Totals(); tot.WCU != 200+200+6 {
		t.Errorf("total %v WCU, want 406", tot.WCU)
	}
	if snap.ReportedWCU != 4+6 {
		t.Errorf("reported %v WCU, want 10 (what DynamoDB said)", snap.ReportedWCU)
	}
}

// PartiQL INSERTs are puts: each billed by its item's size, on its
// item's partition, no less than AWS's rules whatever DynamoDB reports
// (DynamoDB Local need not report a BatchExecuteStatement's capacity).
func TestPartiQLInsertsBilledAsPuts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		reported []types.ConsumedCapacity
		want     float64
	}{
		{"nothing reported", nil, 25},
		{"under-reported", []types.ConsumedCapacity{cc("tbl", 1, nil)}, 25},
		{"reported more", []types.ConsumedCapacity{cc("tbl", 30, nil)}, 30},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var r Recorder
			r.SetTable("tbl", Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}})
			var stmts []types.BatchStatementRequest
			for i := range 25 {
				it := item("TASK#1#0#0", fmt.Sprintf("%06d", i), 300)
				stmts = append(stmts, dynamo.InsertStatement("tbl", it))
			}
			r.Record("DynamoDB", "BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{Statements: stmts},
				&dynamodb.BatchExecuteStatementOutput{ConsumedCapacity: c.reported}, nil)
			ks := keyStats(r.Snapshot(), "DynamoDB")
			if got := ks["tbl TASK#1#0#0"].WCU; math.Abs(got-c.want) > 1e-9 {
				t.Errorf("task bucket: %v WCU, want %v", got, c.want)
			}
		})
	}
}

func TestParseInsert(t *testing.T) {
	t.Parallel()
	params := []types.AttributeValue{s("p"), s("q")}
	cases := []struct {
		name, stmt string
		table      string
		ok         bool
	}{
		{"quoted table", `INSERT INTO "tbl" VALUE {'pk': ?, 'sk': ?}`, "tbl", true},
		{"bare table", `insert into tbl value {'pk' : ?,'sk':?}`, "tbl", true},
		{"a literal value", `INSERT INTO "tbl" VALUE {'pk': ?, 'sk': 'x'}`, "tbl", false},
		{"an update", `UPDATE "tbl" SET a = ? WHERE pk = ?`, "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			table, it, ok := ParseInsert(c.stmt, params)
			if ok != c.ok || table != c.table {
				t.Fatalf("ParseInsert(%q) = %q, %v, %v; want %q, ok %v", c.stmt, table, it, ok, c.table, c.ok)
			}
			if ok && (attrString(it["pk"]) != "p" || attrString(it["sk"]) != "q") {
				t.Fatalf("item %v, want pk p, sk q", it)
			}
		})
	}
}

// A request's keys count once each, however many of its accesses touch
// them, past the set's inline four too.
func TestKeySet(t *testing.T) {
	k := func(i int) Key { return Key{"DynamoDB", "tbl", fmt.Sprint("K", i)} }
	for _, tc := range []struct {
		name string
		adds []int
		want []bool
	}{
		{"one", []int{1}, []bool{true}},
		{"repeated", []int{1, 1, 2, 1, 2}, []bool{true, false, true, false, false}},
		{"past four", []int{1, 2, 3, 4, 5, 6, 5, 1, 6, 7}, []bool{true, true, true, true, true, true, false, false, false, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s keySet
			for i, a := range tc.adds {
				if got := s.add(k(a)); got != tc.want[i] {
					t.Fatalf("add #%d (K%d): %v, want %v", i, a, got, tc.want[i])
				}
			}
		})
	}
}

// PartiQL UPDATEs (the store's batched commits) are updates: each lands
// on its own item's partition, and an index key it sets on the index's,
// unless refused; the request counts once, its statements each as an
// operation.
func TestPartiQLUpdatesLandOnTheirItems(t *testing.T) {
	t.Parallel()
	var r Recorder
	r.SetTable("tbl", Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}})
	var stmts []types.BatchStatementRequest
	for i := range 3 {
		stmts = append(stmts, types.BatchStatementRequest{
			Statement: aws.String(`UPDATE "tbl" SET "st" = ? SET "gpk" = ? REMOVE "lease" WHERE "pk" = ? AND "sk" = ? AND ("st" = ? AND "tok" IN [?, ?])`),
			Parameters: []types.AttributeValue{s("SUCCEEDED"), s(fmt.Sprint("DUE#", i)), s(fmt.Sprint("TASK#", i)), s("0"),
				s("CLAIMED"), s("t1"), s("t2")},
		})
	}
	r.Record("DynamoDB", "BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{Statements: stmts},
		&dynamodb.BatchExecuteStatementOutput{Responses: make([]types.BatchStatementResponse, len(stmts))}, nil)
	// The same again, refused (another attempt's commit): each is billed
	// its write, and writes no index entry.
	refused := make([]types.BatchStatementResponse, len(stmts))
	for i := range refused {
		refused[i].Error = &types.BatchStatementError{Code: types.BatchStatementErrorCodeEnumConditionalCheckFailed}
	}
	for i := range stmts {
		stmts[i].Parameters[1] = s(fmt.Sprint("MOVED#", i))
	}
	r.Record("DynamoDB", "BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{Statements: stmts},
		&dynamodb.BatchExecuteStatementOutput{Responses: refused}, nil)
	snap := r.Snapshot()
	ks := keyStats(snap, "DynamoDB")
	for i := range 3 {
		if k := fmt.Sprint("tbl TASK#", i); ks[k].Writes != 2 {
			t.Errorf("%s: %+v, want two writes (one refused)", k, ks[k])
		}
	}
	for i := range 3 {
		for _, k := range []string{fmt.Sprint("tbl/due DUE#", i)} {
			if ks[k].Writes != 1 || ks[k].WCU < 1 {
				t.Errorf("%s: %+v, want one write of at least 1 WCU", k, ks[k])
			}
		}
	}
	if len(ks) != 6 {
		t.Errorf("keys %v, want the three items' and their index entries'", ks)
	}
	if tot := snap.Totals(); tot.Requests["DynamoDB"] != 2 || tot.Ops["DynamoDB"] != 6 {
		t.Errorf("%d requests, %d operations; want 2 and 6", tot.Requests["DynamoDB"], tot.Ops["DynamoDB"])
	}
}

func TestParseUpdateStatement(t *testing.T) {
	t.Parallel()
	params := []types.AttributeValue{s("v1"), s("v2"), s("P"), s("S"), s("c")}
	cases := []struct {
		name, stmt string
		ok         bool
		set        []string
		removed    []string
		where      []string // the WHERE's leading equalities, bound to params after the set's
	}{
		{"the store's", `UPDATE "tbl" SET "a" = ? SET "b" = ? REMOVE "x" REMOVE "y" WHERE "pk" = ? AND "sk" = ? AND ("st" = ?)`, true, []string{"a", "b"}, []string{"x", "y"}, []string{"pk", "sk"}},
		{"no remove, no condition", `UPDATE "tbl" SET "a" = ? SET "b" = ? WHERE "pk" = ? AND "sk" = ?`, true, []string{"a", "b"}, nil, []string{"pk", "sk"}},
		{"three equalities", `UPDATE "tbl" SET "a" = ? SET "b" = ? WHERE "st" = ? AND "pk" = ? AND "sk" = ?`, true, []string{"a", "b"}, nil, []string{"st", "pk", "sk"}},
		{"a literal set", `UPDATE "tbl" SET "a" = 'k' SET "b" = ? WHERE "pk" = ? AND "sk" = ?`, false, nil, nil, nil},
		{"an expression set", `UPDATE "tbl" SET "a" = ? + ? WHERE "pk" = ? AND "sk" = ?`, false, nil, nil, nil},
		{"too few parameters", `UPDATE "tbl" SET "a" = ? SET "b" = ? SET "c" = ? SET "d" = ? WHERE "pk" = ? AND "sk" = ?`, false, nil, nil, nil},
		{"an insert", `INSERT INTO "tbl" VALUE {'pk': ?, 'sk': ?}`, false, nil, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			table, set, where, removed, ok := ParseUpdateStatement(c.stmt, params)
			if ok != c.ok {
				t.Fatalf("ok %v, want %v (table %q, where %v)", ok, c.ok, table, where)
			}
			if !ok {
				return
			}
			if table != "tbl" || len(set) != len(c.set) || len(where) != len(c.where) || !slices.Equal(removed, c.removed) {
				t.Fatalf("table %q, set %v, where %v, removed %v; want tbl, %v, %v, %v", table, set, where, removed, c.set, c.where, c.removed)
			}
			for i, a := range append(slices.Clone(c.set), c.where...) {
				got := set[a]
				if i >= len(c.set) {
					got = where[a]
				}
				if attrString(got) != attrString(params[i]) {
					t.Errorf("%s = %v, want %v", a, got, params[i])
				}
			}
		})
	}
}
