package sqswire_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/sqswire"
)

var _ queue.API = (*sqswire.Client)(nil)

// recorder answers every request with its answer and keeps the bodies
// and headers it got.
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	headers []http.Header
	status  int
	answer  string
	header  map[string]string
	// failFirst requests are answered 500 InternalError.
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
	status, answer := r.status, r.answer
	if len(r.bodies) <= r.failFirst {
		status, answer = 500, `{"__type":"com.amazonaws.sqs#InternalError","message":"boom"}`
	}
	for k, v := range r.header {
		w.Header().Set(k, v)
	}
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amzn-Requestid", "REQ1")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, answer)
}

func (r *recorder) last() ([]byte, http.Header) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.bodies) == 0 {
		return nil, nil
	}
	return r.bodies[len(r.bodies)-1], r.headers[len(r.headers)-1]
}

func (r *recorder) set(status int, answer string, header map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.answer, r.header = status, answer, header
}

func testConfig(url string) aws.Config {
	cfg := aws.Config{
		Region:       "us-east-1",
		Credentials:  aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider("AKID", "SECRET", "TOKEN")),
		BaseEndpoint: aws.String(url),
	}
	awsconf.Harden(&cfg)
	return cfg
}

// pair is the SDK's client and the lean one over one recorder, neither
// retrying.
func pair(t testing.TB) (*recorder, *sqs.Client, *sqswire.Client) {
	rec, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	lean, err := sqswire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rec, sqs.NewFromConfig(cfg), lean
}

// call runs op with in on c (the SDK's client or the lean one).
func call(c queue.API, op string, in any) (any, error) {
	ctx := context.Background()
	switch op {
	case "SendMessageBatch":
		return c.SendMessageBatch(ctx, in.(*sqs.SendMessageBatchInput))
	case "ReceiveMessage":
		return c.ReceiveMessage(ctx, in.(*sqs.ReceiveMessageInput))
	case "DeleteMessageBatch":
		return c.DeleteMessageBatch(ctx, in.(*sqs.DeleteMessageBatchInput))
	case "ChangeMessageVisibility":
		return c.ChangeMessageVisibility(ctx, in.(*sqs.ChangeMessageVisibilityInput))
	case "ChangeMessageVisibilityBatch":
		return c.ChangeMessageVisibilityBatch(ctx, in.(*sqs.ChangeMessageVisibilityBatchInput))
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

const queueURL = "http://sqs.us-east-1.localhost:4566/000000000000/q"

func attrs() map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		"traceparent": {DataType: aws.String("String"), StringValue: aws.String("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
		"n":           {DataType: aws.String("Number"), StringValue: aws.String("42")},
		"b":           {DataType: aws.String("Binary"), BinaryValue: []byte{0, 1, 2, 0xff}},
		"lists":       {DataType: aws.String("String"), StringListValues: []string{"a", "\"q\"\n"}, BinaryListValues: [][]byte{{1}, {}}},
	}
}

func inputs() []struct {
	op string
	in any
} {
	return []struct {
		op string
		in any
	}{
		{"SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.SendMessageBatchRequestEntry{
			{Id: aws.String("0"), MessageBody: aws.String(`{"job":"J1","task":"t\u00e9 <&>"}`), DelaySeconds: 5, MessageAttributes: attrs()},
			{Id: aws.String("1"), MessageBody: aws.String("x"), MessageDeduplicationId: aws.String("d"), MessageGroupId: aws.String("g"),
				MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {DataType: aws.String("String"), StringValue: aws.String("Root=1-abc")}}},
		}}},
		{"SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.SendMessageBatchRequestEntry{}}},
		{"ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), MaxNumberOfMessages: 10, WaitTimeSeconds: 20, VisibilityTimeout: 30,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"ApproximateReceiveCount", "SentTimestamp"},
			AttributeNames: []types.QueueAttributeName{"All"}, ReceiveRequestAttemptId: aws.String("r1")}},
		{"ReceiveMessage", &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL)}},
		{"DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.DeleteMessageBatchRequestEntry{
			{Id: aws.String("0"), ReceiptHandle: aws.String("h0")}, {Id: aws.String("1"), ReceiptHandle: aws.String("h/1+=")}}}},
		{"ChangeMessageVisibility", &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String("h"), VisibilityTimeout: 0}},
		{"ChangeMessageVisibility", &sqs.ChangeMessageVisibilityInput{QueueUrl: aws.String(queueURL), ReceiptHandle: aws.String("h"), VisibilityTimeout: 43200}},
		{"ChangeMessageVisibilityBatch", &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.ChangeMessageVisibilityBatchRequestEntry{
			{Id: aws.String("0"), ReceiptHandle: aws.String("h0"), VisibilityTimeout: 0}, {Id: aws.String("1"), ReceiptHandle: aws.String("h1"), VisibilityTimeout: 60}}}},
	}
}

// TestEncodeMatchesSDK: every input goes out as the SDK's client sends
// it: the same JSON, the same protocol headers, to the same endpoint (the
// config's: the queue URL names another host, and both clients send to
// the recorder).
func TestEncodeMatchesSDK(t *testing.T) {
	rec, sdk, lean := pair(t)
	for i, c := range inputs() {
		rec.set(200, "{}", nil)
		// The SDK checks an answer's MD5s: {} has none to check.
		_, _ = call(sdk, c.op, c.in)
		want, wh := rec.last()
		if _, err := call(lean, c.op, c.in); err != nil {
			t.Fatalf("%d %s: lean: %v", i, c.op, err)
		}
		got, gh := rec.last()
		sameJSON(t, c.op, want, got)
		for _, h := range []string{"Content-Type", "X-Amz-Target", "X-Amzn-Query-Mode"} {
			if wh.Get(h) != gh.Get(h) {
				t.Errorf("%d %s: %s: SDK %q, lean %q", i, c.op, h, wh.Get(h), gh.Get(h))
			}
		}
		if gh.Get("Authorization") == "" {
			t.Errorf("%d %s: unsigned", i, c.op)
		}
	}
}

func md5hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

func outputs() []struct{ op, body string } {
	body := `{"job":"J1","task":"t\u00e9"}`
	return []struct{ op, body string }{
		{"SendMessageBatch", `{"Successful":[{"Id":"0","MessageId":"m0","MD5OfMessageBody":"` + md5hex("x") + `","MD5OfMessageAttributes":"a","MD5OfMessageSystemAttributes":"s","SequenceNumber":"7"}],` +
			`"Failed":[{"Id":"1","SenderFault":true,"Code":"InvalidParameterValue","Message":"bad"},{"Id":"2","SenderFault":false,"Code":"InternalError"}]}`},
		{"SendMessageBatch", `{"Successful":[],"Failed":[]}`},
		{"SendMessageBatch", `{}`},
		{"ReceiveMessage", `{"Messages":[{"MessageId":"m0","ReceiptHandle":"h0","Body":` + jsonString(body) + `,"MD5OfBody":"` + md5hex(body) + `",` +
			`"Attributes":{"ApproximateReceiveCount":"2","SentTimestamp":"1700000000000"},"MD5OfMessageAttributes":"x",` +
			`"MessageAttributes":{"traceparent":{"DataType":"String","StringValue":"00-1-2-01"},"b":{"DataType":"Binary","BinaryValue":"AAEC/w=="},` +
			`"l":{"DataType":"String","StringListValues":["a"],"BinaryListValues":["AQ=="]}}},{"MessageId":"m1","ReceiptHandle":"h1","Body":"","MD5OfBody":"` + md5hex("") + `"}]}`},
		{"ReceiveMessage", `{"Messages":[]}`},
		{"ReceiveMessage", `{}`},
		{"ReceiveMessage", `{"Messages":[{"MessageId":"m0","Attributes":null,"MessageAttributes":null,"Unknown":{"x":[1,2]}}]}`},
		{"DeleteMessageBatch", `{"Successful":[{"Id":"0"}],"Failed":[{"Id":"1","SenderFault":true,"Code":"ReceiptHandleIsInvalid","Message":"gone"}]}`},
		{"ChangeMessageVisibility", `{}`},
		{"ChangeMessageVisibility", ``},
		{"ChangeMessageVisibilityBatch", `{"Successful":[{"Id":"0"},{"Id":"1"}]}`},
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
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
// from its middleware and the queues do not read.
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
		rec.set(200, c.body, nil)
		in := minimalInput(c.op)
		if c.op == "SendMessageBatch" {
			// The entry the answer's MD5 is of.
			in = &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.SendMessageBatchRequestEntry{{Id: aws.String("0"), MessageBody: aws.String("x")}}}
		}
		want, err := call(sdk, c.op, in)
		if err != nil {
			t.Fatalf("%d %s: SDK: %v", i, c.op, err)
		}
		got, err := call(lean, c.op, in)
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

// deadlineRecorder is an HTTP client that answers an empty receive and
// keeps whether each request had a deadline.
type deadlineRecorder struct {
	mu        sync.Mutex
	deadlines []bool
}

func (d *deadlineRecorder) Do(req *http.Request) (*http.Response, error) {
	_, ok := req.Context().Deadline()
	d.mu.Lock()
	d.deadlines = append(d.deadlines, ok)
	d.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{}`)), Request: req}, nil
}

// TestLongPollHasNoDeadline: a long poll goes to the config's HTTP client
// with the caller's context only, as the SDK's does: nothing in the client
// cuts a 20-second WaitTimeSeconds short.
func TestLongPollHasNoDeadline(t *testing.T) {
	rec := &deadlineRecorder{}
	cfg := testConfig("http://127.0.0.1:1")
	cfg.HTTPClient = rec
	lean, err := sqswire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lean.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(queueURL), WaitTimeSeconds: 20}); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.deadlines) != 1 || rec.deadlines[0] {
		t.Errorf("requests with a deadline: %v, want one without", rec.deadlines)
	}
}
