package loadmodel

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

var updateMix = flag.Bool("update-mix", false, "rewrite testdata/mix.golden from the recorder's output")

// mixRequest is one recorded call: what Record is given.
type mixRequest struct {
	service, op string
	in, out     any
	err         error
}

// mixTable is the store's table as the bench describes it: the due index
// keyed by gpk.
var mixTable = Table{PK: "pk", SK: "sk", Indexes: map[string]string{"due": "gpk"}}

func consumed(table string, units float64, due float64) *types.ConsumedCapacity {
	cc := &types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(units + due)}
	if due > 0 {
		cc.GlobalSecondaryIndexes = map[string]types.Capacity{"due": {CapacityUnits: aws.Float64(due)}}
	}
	return cc
}

// requestMix is the requests of tasks tasks of a no-op stage as the
// store, the queues and the outputs send them (claims, commits, counts,
// a materialization's transaction and put, the sweep's query, a refused
// claim, a delivery's receive and delete), with the answers DynamoDB
// Local gives, in the order a run interleaves them.
func requestMix(tasks int) []mixRequest {
	const tbl = "bw"
	names := map[string]string{"#st": "st", "#rin": "rin", "#rout": "rout"}
	var rs []mixRequest
	add := func(service, op string, in, out any, err error) {
		rs = append(rs, mixRequest{service, op, in, out, err})
	}
	queue := "https://sqs.us-east-1.amazonaws.com/000000000000/bw-ready"
	for t := range tasks {
		pk := fmt.Sprintf("TASK#job%d#s0", t%3)
		sk := fmt.Sprintf("P#%06d", t)
		k := key(pk, sk)
		if t%50 == 0 {
			// A materialization: the stage and its ready markers in one
			// transaction, the message batch after.
			add("DynamoDB", "TransactWriteItems", &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
				{Put: &types.Put{TableName: aws.String(tbl), Item: map[string]types.AttributeValue{"pk": s(pk), "sk": s("READY#" + sk), "gpk": s(fmt.Sprintf("due#%d", t%8)), "due": n("17000")}}},
				{Update: &types.Update{TableName: aws.String(tbl), Key: key("JOB#job"+strconv.Itoa(t%3), "STAGE#s0"),
					UpdateExpression: aws.String("SET #st = :st, sent = :sent"), ExpressionAttributeNames: map[string]string{"#st": "st"},
					ExpressionAttributeValues: map[string]types.AttributeValue{":st": s("RUNNING"), ":sent": n(strconv.Itoa(t))}}},
				{ConditionCheck: &types.ConditionCheck{TableName: aws.String(tbl), Key: key("JOB#job"+strconv.Itoa(t%3), "JOB")}},
			}}, &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: []types.ConsumedCapacity{*consumed(tbl, 2, 2)}}, nil)
			var entries []sqstypes.SendMessageBatchRequestEntry
			var ok []sqstypes.SendMessageBatchResultEntry
			for i := range 10 {
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(pk + "/" + sk)})
				ok = append(ok, sqstypes.SendMessageBatchResultEntry{Id: aws.String(strconv.Itoa(i))})
			}
			add("SQS", "SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String(queue), Entries: entries},
				&sqs.SendMessageBatchOutput{Successful: ok}, nil)
		}
		if t%10 == 0 {
			var msgs []sqstypes.Message
			for i := range 10 {
				msgs = append(msgs, sqstypes.Message{Body: aws.String(fmt.Sprintf("%s/P#%06d", pk, t+i))})
			}
			add("SQS", "ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String(queue)}, &sqs.ReceiveMessageOutput{Messages: msgs}, nil)
		}
		// The claim: a first claim writes the record and its index entry.
		claimVals := map[string]types.AttributeValue{":tok": s(fmt.Sprintf("tok%d", t)), ":lease": n("1700000030000"),
			":now": n("1700000000000"), ":st": s("CLAIMED"), ":gpk": s(fmt.Sprintf("due#%d", t%8)), ":due": n("1700000040000"),
			":ex": s("exec-1"), ":mx": n("3"), ":one": n("1")}
		claimUpd := "SET mx = if_not_exists(mx, :mx), #st = :st, tok = :tok, lease = :lease, upd = :now, ex = :ex, gpk = :gpk, due = :due ADD att :one"
		in := &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: k, UpdateExpression: aws.String(claimUpd),
			ConditionExpression: aws.String("attribute_not_exists(pk) OR (#st = :ready)"), ExpressionAttributeNames: names,
			ExpressionAttributeValues: claimVals, ReturnValues: types.ReturnValueAllNew}
		if t%17 == 5 {
			// A duplicate delivery's claim, refused: billed, nothing learnt.
			add("DynamoDB", "UpdateItem", in, nil, &types.ConditionalCheckFailedException{Message: aws.String("held")})
		}
		add("DynamoDB", "UpdateItem", in, &dynamodb.UpdateItemOutput{ConsumedCapacity: consumed(tbl, 1, 1)}, nil)
		if t%25 == 3 {
			// A lost response's retry: the request fails unbilled.
			add("DynamoDB", "UpdateItem", in, nil, fmt.Errorf("connection reset"))
		}
		// The commit: the fence, its index entry's due moved.
		commitVals := map[string]types.AttributeValue{":tok": s(fmt.Sprintf("tok%d", t)), ":st": s("SUCCEEDED"),
			":now": n("1700000001000"), ":cnt": n("1700000061000"), ":rin": n("0"), ":rout": n("0")}
		add("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: k,
			UpdateExpression:         aws.String("SET #st = :st, upd = :now, #rin = :rin, #rout = :rout, due = :cnt REMOVE lease, ctok, clease, cex"),
			ConditionExpression:      aws.String("tok = :tok"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: commitVals,
		}, &dynamodb.UpdateItemOutput{ConsumedCapacity: consumed(tbl, 1, 1)}, nil)
		if t%10 == 9 {
			// The batched count on a counter shard, then the deletes.
			add("DynamoDB", "UpdateItem", &dynamodb.UpdateItemInput{TableName: aws.String(tbl), Key: key(fmt.Sprintf("CNT#job%d#s0#%d", t%3, t%4), "CNT"),
				UpdateExpression:          aws.String("ADD left :minus, cset :ids SET upd = :now REMOVE gpk"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":minus": n("-10"), ":ids": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}, ":now": n("1")},
			}, &dynamodb.UpdateItemOutput{ConsumedCapacity: consumed(tbl, 1, 0)}, nil)
			var dels []sqstypes.DeleteMessageBatchRequestEntry
			for i := range 10 {
				dels = append(dels, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: aws.String("r")})
			}
			add("SQS", "DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queue), Entries: dels}, &sqs.DeleteMessageBatchOutput{}, nil)
		}
		if t%40 == 7 {
			add("DynamoDB", "GetItem", &dynamodb.GetItemInput{TableName: aws.String(tbl), Key: key("JOB#job"+strconv.Itoa(t%3), "JOB"), ConsistentRead: aws.Bool(true)},
				&dynamodb.GetItemOutput{Item: item("JOB#job"+strconv.Itoa(t%3), "JOB", 1500), ConsumedCapacity: consumed(tbl, 1, 0)}, nil)
			add("DynamoDB", "Query", &dynamodb.QueryInput{TableName: aws.String(tbl), IndexName: aws.String("due"),
				KeyConditionExpression:    aws.String("gpk = :g AND due < :now"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":g": s(fmt.Sprintf("due#%d", t%8)), ":now": n("1")}},
				&dynamodb.QueryOutput{Items: []map[string]types.AttributeValue{item(pk, sk, 200)}, ConsumedCapacity: consumed(tbl, 0.5, 0)}, nil)
			add("S3", "PutObject", &s3.PutObjectInput{Bucket: aws.String("bw-data"), Key: aws.String("jobs/job/s0/part-" + strconv.Itoa(t))}, &s3.PutObjectOutput{}, nil)
			add("DynamoDB", "BatchWriteItem", &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{tbl: {
				{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{"pk": s("LOG#" + pk), "sk": s(sk), "gpk": s("due#x")}}},
				{DeleteRequest: &types.DeleteRequest{Key: key(pk, "READY#"+sk)}},
			}}}, &dynamodb.BatchWriteItemOutput{ConsumedCapacity: []types.ConsumedCapacity{*consumed(tbl, 2, 1)}}, nil)
		}
	}
	return rs
}

// render prints a snapshot as sorted lines, the floats exact, so two
// recorders' outputs compare byte for byte.
func render(snap Snapshot) string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	var lines []string
	for name, op := range snap.Ops {
		lines = append(lines, fmt.Sprintf("op %s requests=%d errors=%d rcu=%s wcu=%s chunks=%d", name, op.Requests, op.Errors, f(op.RCU), f(op.WCU), op.Chunks))
	}
	for k, ks := range snap.Keys {
		lines = append(lines, fmt.Sprintf("key %s|%s|%s requests=%d reads=%d writes=%d rcu=%s wcu=%s", k.Service, k.Resource, k.Key, ks.Requests, ks.Reads, ks.Writes, f(ks.RCU), f(ks.WCU)))
	}
	for q, n := range snap.Sent {
		lines = append(lines, fmt.Sprintf("sent %s %d", q, n))
	}
	slices.Sort(lines)
	lines = append(lines, fmt.Sprintf("reported rcu=%s wcu=%s estimated=%d", f(snap.ReportedRCU), f(snap.ReportedWCU), snap.Estimated))
	return strings.Join(lines, "\n") + "\n"
}

// TestRecorderMixGolden holds the recorder's totals over a request mix to
// those recorded before its data structures last changed: the bench's
// per-key and per-operation figures must not move when the recorder gets
// cheaper.
func TestRecorderMixGolden(t *testing.T) {
	t.Parallel()
	r := &Recorder{}
	r.SetTable("bw", mixTable)
	for _, q := range requestMix(400) {
		r.Record(q.service, q.op, q.in, q.out, q.err)
	}
	got := render(r.Snapshot())
	path := filepath.Join("testdata", "mix.golden")
	if *updateMix {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("recorder totals differ from %s:\n%s", path, lineDiff(string(want), got))
	}
}

func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for _, l := range w {
		if !slices.Contains(g, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// BenchmarkRecorderMix is the recorder's cost per request of the mix.
func BenchmarkRecorderMix(b *testing.B) {
	mix := requestMix(1000)
	r := &Recorder{}
	r.SetTable("bw", mixTable)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		q := mix[i%len(mix)]
		r.Record(q.service, q.op, q.in, q.out, q.err)
	}
}
