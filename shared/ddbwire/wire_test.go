package ddbwire_test

import (
	"context"
	"encoding/json"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/batchwork/batchwork/shared/ddbwire"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// recorder answers every request with its answer and keeps the bodies
// and headers it got.
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	status  int
	answer  string
	crc     string // "" : the answer's own
	// failFirst requests are answered 500 InternalServerError.
	failFirst int
}

func newRecorder(t testing.TB) (*recorder, *httptest.Server) {
	r := &recorder{status: 200, answer: "{}"}
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	r.headers = append(r.headers, req.Header.Clone())
	status, answer, crc := r.status, r.answer, r.crc
	if len(r.bodies) <= r.failFirst {
		status, answer = 500, `{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"boom"}`
	}
	r.mu.Unlock()
	if crc == "" {
		crc = strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(answer))), 10)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", crc)
	w.Header().Set("X-Amzn-Requestid", "REQ1")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (r *recorder) last() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return nil
	}
	return r.bodies[len(r.bodies)-1]
}

func (r *recorder) set(status int, answer string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.answer = status, answer
}

// pair is the SDK's client and the lean one over one recorder, neither
// retrying.
func pair(t testing.TB) (*recorder, *dynamodb.Client, *ddbwire.Client) {
	rec, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	lean, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rec, dynamodb.NewFromConfig(cfg), lean
}

// call runs op with in on c (the SDK's client or the lean one).
func call(c API, op string, in any) (any, error) {
	ctx := context.Background()
	switch op {
	case "GetItem":
		return c.GetItem(ctx, in.(*dynamodb.GetItemInput))
	case "PutItem":
		return c.PutItem(ctx, in.(*dynamodb.PutItemInput))
	case "UpdateItem":
		return c.UpdateItem(ctx, in.(*dynamodb.UpdateItemInput))
	case "Query":
		return c.Query(ctx, in.(*dynamodb.QueryInput))
	case "Scan":
		return c.Scan(ctx, in.(*dynamodb.ScanInput))
	case "BatchGetItem":
		return c.BatchGetItem(ctx, in.(*dynamodb.BatchGetItemInput))
	case "TransactWriteItems":
		return c.TransactWriteItems(ctx, in.(*dynamodb.TransactWriteItemsInput))
	case "BatchExecuteStatement":
		return c.BatchExecuteStatement(ctx, in.(*dynamodb.BatchExecuteStatementInput))
	}
	panic(op)
}

func sameJSON(t *testing.T, what string, want, got []byte) {
	t.Helper()
	var w, g any
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: SDK's JSON: %v: %s", what, err, want)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: lean JSON: %v: %s", what, err, got)
	}
	if !reflect.DeepEqual(w, g) {
		t.Errorf("%s:\nSDK  %s\nlean %s", what, want, got)
	}
}

var (
	key   = map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "J#1"}, "sk": &types.AttributeValueMemberS{Value: "T#2"}}
	table = aws.String("t")
)

// everyKind is an item with a value of every kind, nested, and strings
// that need escaping.
func everyKind() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"s":     &types.AttributeValueMemberS{Value: "quote \" backslash \\ newline \n tab \t nul \x00 é 日本 \u2028 bad \xff <&>"},
		"empty": &types.AttributeValueMemberS{Value: ""},
		"n":     &types.AttributeValueMemberN{Value: "-12.5e3"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1, 2, 250, 251, 255}},
		"bool":  &types.AttributeValueMemberBOOL{Value: true},
		"f":     &types.AttributeValueMemberBOOL{Value: false},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"key \"q\"": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberN{Value: "1"}, &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
		}},
		"l":  &types.AttributeValueMemberL{Value: []types.AttributeValue{}},
		"ss": &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns": &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
		"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
	}
}

func inputs() []struct {
	op string
	in any
} {
	names := map[string]string{"#s": "status"}
	values := map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "READY"}, ":all": &types.AttributeValueMemberM{Value: everyKind()}}
	return []struct {
		op string
		in any
	}{
		{"GetItem", &dynamodb.GetItemInput{TableName: table, Key: key}},
		{"GetItem", &dynamodb.GetItemInput{TableName: table, Key: key, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: names, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}},
		{"PutItem", &dynamodb.PutItemInput{TableName: table, Item: everyKind(), ConditionExpression: aws.String("attribute_not_exists(pk) OR #s = :v"), ExpressionAttributeNames: names, ExpressionAttributeValues: values,
			ReturnValues: types.ReturnValueAllOld, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes, ReturnItemCollectionMetrics: types.ReturnItemCollectionMetricsSize}},
		{"UpdateItem", benchUpdate()},
		{"UpdateItem", &dynamodb.UpdateItemInput{TableName: table, Key: key, UpdateExpression: aws.String("SET #s = :all"), ExpressionAttributeNames: names, ExpressionAttributeValues: values, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
		{"Query", &dynamodb.QueryInput{TableName: table, IndexName: aws.String("due"), KeyConditionExpression: aws.String("pk = :v"), FilterExpression: aws.String("#s = :v"), ProjectionExpression: aws.String("pk, sk"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values, ExclusiveStartKey: key, Limit: aws.Int32(25), ScanIndexForward: aws.Bool(false), ConsistentRead: aws.Bool(false), Select: types.SelectSpecificAttributes, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}},
		{"Scan", &dynamodb.ScanInput{TableName: table, IndexName: aws.String("due"), FilterExpression: aws.String("#s <= :v"), ProjectionExpression: aws.String("pk, sk"),
			ExpressionAttributeNames: names, ExpressionAttributeValues: values, ExclusiveStartKey: key, Limit: aws.Int32(50), Segment: aws.Int32(1), TotalSegments: aws.Int32(4), ConsistentRead: aws.Bool(false), Select: types.SelectAllProjectedAttributes, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes}},
		{"BatchGetItem", &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			"t":  {Keys: []map[string]types.AttributeValue{key, everyKind()}, ConsistentRead: aws.Bool(true), ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: names},
			"t2": {Keys: []map[string]types.AttributeValue{key}},
		}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal}},
		{"TransactWriteItems", &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String("tok-1"), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal, ReturnItemCollectionMetrics: types.ReturnItemCollectionMetricsSize,
			TransactItems: []types.TransactWriteItem{
				{ConditionCheck: &types.ConditionCheck{TableName: table, Key: key, ConditionExpression: aws.String("#s = :v"), ExpressionAttributeNames: names, ExpressionAttributeValues: values, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}},
				{Delete: &types.Delete{TableName: table, Key: key, ConditionExpression: aws.String("attribute_exists(pk)")}},
				{Put: &types.Put{TableName: table, Item: everyKind(), ConditionExpression: aws.String("attribute_not_exists(pk)")}},
				{Update: &types.Update{TableName: table, Key: key, UpdateExpression: aws.String("SET #s = :v"), ExpressionAttributeNames: names, ExpressionAttributeValues: values}},
			}}},
		{"BatchExecuteStatement", &dynamodb.BatchExecuteStatementInput{ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal, Statements: []types.BatchStatementRequest{
			{Statement: aws.String(`INSERT INTO "t" VALUE {'pk': ?, 'sk': ?}`), Parameters: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}, &types.AttributeValueMemberM{Value: everyKind()}}, ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld},
			{Statement: aws.String(`SELECT * FROM "t" WHERE pk = ?`), ConsistentRead: aws.Bool(true), Parameters: []types.AttributeValue{&types.AttributeValueMemberS{Value: "a"}}},
		}}},
	}
}

// TestEncodeMatchesSDK: every request body is the JSON the SDK's
// serializer sends for the same input, with the same target and content
// type.
func TestEncodeMatchesSDK(t *testing.T) {
	rec, sdk, lean := pair(t)
	for i, c := range inputs() {
		if _, err := call(sdk, c.op, c.in); err != nil {
			t.Fatalf("%d %s: SDK: %v", i, c.op, err)
		}
		want, wantH := rec.last(), rec.headers[len(rec.headers)-1]
		if _, err := call(lean, c.op, c.in); err != nil {
			t.Fatalf("%d %s: lean: %v", i, c.op, err)
		}
		got, gotH := rec.last(), rec.headers[len(rec.headers)-1]
		sameJSON(t, strconv.Itoa(i)+" "+c.op, want, got)
		for _, h := range []string{"X-Amz-Target", "Content-Type"} {
			if wantH.Get(h) != gotH.Get(h) {
				t.Errorf("%d %s: %s: SDK %q, lean %q", i, c.op, h, wantH.Get(h), gotH.Get(h))
			}
		}
		if !strings.HasPrefix(gotH.Get("Authorization"), "AWS4-HMAC-SHA256 Credential=AKID/") || gotH.Get("X-Amz-Security-Token") != "TOKEN" {
			t.Errorf("%d %s: not signed: %v", i, c.op, gotH)
		}
	}
}

// TestTransactionGetsToken: a transaction without a ClientRequestToken
// gets one, the same on every attempt of the call, a new one per call.
func TestTransactionGetsToken(t *testing.T) {
	rec, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	lean, err := ddbwire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec.failFirst = 2
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{Delete: &types.Delete{TableName: table, Key: key}}}}
	if _, err = lean.TransactWriteItems(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	_, _ = lean.TransactWriteItems(context.Background(), in)
	tokens := map[string]int{}
	for _, b := range rec.bodies {
		var v struct{ ClientRequestToken string }
		_ = json.Unmarshal(b, &v)
		tokens[v.ClientRequestToken]++
	}
	if len(rec.bodies) < 4 || len(tokens) != 2 || in.ClientRequestToken != nil {
		t.Fatalf("tokens per attempt %v over %d attempts (input's %v)", tokens, len(rec.bodies), in.ClientRequestToken)
	}
}

func outputs() []struct{ op, body string } {
	cc := `"ConsumedCapacity":{"TableName":"t","CapacityUnits":1.5,"ReadCapacityUnits":0.5,"WriteCapacityUnits":1,"Table":{"CapacityUnits":1.5},"GlobalSecondaryIndexes":{"due":{"CapacityUnits":1}},"LocalSecondaryIndexes":{"l":{"ReadCapacityUnits":2}}}`
	item := `{"s":{"S":"a\"b\\c\u00e9\ud83d\ude00\n"},"n":{"N":"1"},"b":{"B":"AAH/"},"t":{"BOOL":true},"z":{"NULL":true},"m":{"M":{"x":{"L":[{"S":"y"},{"M":{}}]}}},"l":{"L":[]},"ss":{"SS":["a"]},"ns":{"NS":["1","2"]},"bs":{"BS":["AQ==","AgM="]}}`
	icm := `"ItemCollectionMetrics":{"ItemCollectionKey":{"pk":{"S":"a"}},"SizeEstimateRangeGB":[0,1.5]}`
	return []struct{ op, body string }{
		{"GetItem", `{}`},
		{"GetItem", `{"Item":` + item + `,` + cc + `,"Unknown":{"deep":[1,2,{"a":null}]}}`},
		{"PutItem", `{"Attributes":` + item + `,` + cc + `,` + icm + `}`},
		{"UpdateItem", ` { "Attributes" : ` + item + ` , ` + cc + ` } `},
		{"Query", `{"Count":2,"ScannedCount":3,"Items":[` + item + `,{}],"LastEvaluatedKey":{"pk":{"S":"a"}},` + cc + `}`},
		{"Query", `{"Count":0,"ScannedCount":0,"Items":[]}`},
		{"Scan", `{"Count":1,"ScannedCount":7,"Items":[` + item + `],"LastEvaluatedKey":{"pk":{"S":"a"},"gpk":{"S":"D#3"}},` + cc + `}`},
		{"Scan", `{"Count":0,"ScannedCount":0,"Items":[]}`},
		{"BatchGetItem", `{"Responses":{"t":[` + item + `],"u":[]},"UnprocessedKeys":{"t":{"Keys":[{"pk":{"S":"a"}}],"ConsistentRead":true,"ProjectionExpression":"#s","ExpressionAttributeNames":{"#s":"status"}}},"ConsumedCapacity":[{"TableName":"t","CapacityUnits":1}]}`},
		{"TransactWriteItems", `{"ConsumedCapacity":[{"TableName":"t","CapacityUnits":2,"WriteCapacityUnits":2}],"ItemCollectionMetrics":{"t":[{"ItemCollectionKey":{"pk":{"S":"a"}},"SizeEstimateRangeGB":[1,2]}]}}`},
		{"BatchExecuteStatement", `{"Responses":[{"TableName":"t","Item":` + item + `},{"Error":{"Code":"ConditionalCheckFailed","Message":"no","Item":{"pk":{"S":"a"}}}},{"Error":{"Code":"DuplicateItem"}}],"ConsumedCapacity":[{"TableName":"t","CapacityUnits":1}]}`},
	}
}

func minimalInput(op string) any {
	for _, c := range inputs() {
		if c.op == op {
			return c.in
		}
	}
	panic(op)
}

// withoutMetadata zeroes the output's ResultMetadata, which the SDK fills
// from its middleware and the store does not read.
func withoutMetadata(out any) any {
	v := reflect.ValueOf(out).Elem()
	if f := v.FieldByName("ResultMetadata"); f.IsValid() {
		f.Set(reflect.Zero(f.Type()))
	}
	return out
}

// TestDecodeMatchesSDK: every answer decodes to what the SDK's
// deserializer makes of it.
func TestDecodeMatchesSDK(t *testing.T) {
	rec, sdk, lean := pair(t)
	for i, c := range outputs() {
		rec.set(200, c.body)
		want, err := call(sdk, c.op, minimalInput(c.op))
		if err != nil {
			t.Fatalf("%d %s: SDK: %v", i, c.op, err)
		}
		got, err := call(lean, c.op, minimalInput(c.op))
		if err != nil {
			t.Fatalf("%d %s: lean: %v", i, c.op, err)
		}
		if w, g := withoutMetadata(want), withoutMetadata(got); !reflect.DeepEqual(w, g) {
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			t.Errorf("%d %s:\nSDK  %s\nlean %s", i, c.op, wj, gj)
		}
	}
}

// TestBadAnswers: a body that is not JSON, or not the CRC32 its header
// says, is an error. A body that fails its CRC32 was damaged on the way
// (the service answered), so it is retried as a lost answer is: the
// store's writes meet a retry after a lost answer already.
func TestBadAnswers(t *testing.T) {
	rec, sdk, lean := pair(t)
	for _, c := range []struct {
		name, body, crc string
		retried         bool
	}{
		{"truncated", `{"Item":{"pk":{"S":"a"}`, "", false},
		{"not JSON", `<html>`, "", false},
		{"trailing data", `{} {}`, "", false},
		{"crc mismatch", `{}`, "12345", true},
		{"crc not a number", `{}`, "x", false},
	} {
		rec.mu.Lock()
		rec.status, rec.answer, rec.crc = 200, c.body, c.crc
		rec.mu.Unlock()
		_, serr := sdk.GetItem(context.Background(), minimalInput("GetItem").(*dynamodb.GetItemInput))
		_, lerr := lean.GetItem(context.Background(), minimalInput("GetItem").(*dynamodb.GetItemInput))
		if lerr == nil {
			t.Errorf("%s: lean: no error (SDK: %v)", c.name, serr)
		}
		var de *smithy.DeserializationError
		if !errors.As(lerr, &de) {
			t.Errorf("%s: lean error %v is not a DeserializationError", c.name, lerr)
		}
		if got := retry.NewStandard().IsErrorRetryable(lerr); got != c.retried {
			t.Errorf("%s: retried %v, want %v (%v)", c.name, got, c.retried, lerr)
		}
	}
	rec.mu.Lock()
	rec.crc = ""
	rec.mu.Unlock()
}

// TestTraceHeaderOnLambda: on Lambda the invocation's X-Ray trace ID goes
// out in X-Amzn-Trace-Id, as from the SDK's client; elsewhere none.
func TestTraceHeaderOnLambda(t *testing.T) {
	t.Setenv("_X_AMZN_TRACE_ID", "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1 x")
	for _, lambda := range []string{"", "fn"} {
		t.Setenv("AWS_LAMBDA_FUNCTION_NAME", lambda) // restored after the test
		if lambda == "" {
			os.Unsetenv("AWS_LAMBDA_FUNCTION_NAME")
		}
		rec, sdk, lean := pair(t)
		for _, c := range []API{sdk, lean} {
			if _, err := call(c, "GetItem", minimalInput("GetItem")); err != nil {
				t.Fatal(err)
			}
		}
		if s, l := rec.headers[0].Get("X-Amzn-Trace-Id"), rec.headers[1].Get("X-Amzn-Trace-Id"); s != l || (lambda != "") != (l != "") {
			t.Errorf("on Lambda %q: SDK %q, lean %q", lambda, s, l)
		}
	}
}
