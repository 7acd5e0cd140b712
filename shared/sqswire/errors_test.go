package sqswire_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/sqswire"
)

// apiError is the error under the SDK's wrappers.
func apiError(t *testing.T, err error) smithy.APIError {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%v (%T) is no smithy.APIError", err, err)
	}
	return ae
}

// TestErrorsMatchSDK: every operation's error answers, typed or not, come
// back as the SDK's error of the same type and members, under the same
// wrappers (operation, HTTP status, request ID).
func TestErrorsMatchSDK(t *testing.T) {
	rec, sdk, lean := pair(t)
	queryErr := map[string]string{"X-Amzn-Query-Error": "AWS.SimpleQueueService.NonExistentQueue;Sender"}
	answers := []struct {
		status int
		body   string
		header map[string]string
	}{
		{400, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`, queryErr},
		{400, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#RequestThrottled","Message":"slow down"}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#ReceiptHandleIsInvalid","message":"gone"}`, map[string]string{"X-Amzn-Query-Error": "ReceiptHandleIsInvalid;Sender"}},
		{400, `{"__type":"com.amazonaws.sqs#TooManyEntriesInBatchRequest","message":"11"}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#OverLimit","message":"too many in flight"}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#MessageNotInflight"}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#InvalidParameterValue","message":"bad"}`, map[string]string{"X-Amzn-Query-Error": "InvalidParameterValue;Sender"}},
		{400, `{"__type":"com.amazonaws.sqs#InvalidParameterValue"}`, nil},
		{400, `{"__type":"com.amazonaws.sqs#UnknownThing","message":"x"}`, map[string]string{"X-Amzn-Query-Error": "AWS.SimpleQueueService.Unknown;Sender"}},
		{400, `{"code":"AccessDenied","message":"no"}`, nil},
		{400, `{"message":"no code"}`, map[string]string{"X-Amzn-ErrorType": "com.amazonaws.sqs#KmsThrottled:http://internal"}},
		{403, ``, nil},
		{500, `{"__type":"com.amazonaws.sqs#InternalError","message":"boom"}`, nil},
		{503, `{"__type":"ServiceUnavailable"}`, nil},
	}
	ops := map[string]bool{}
	for _, c := range inputs() {
		if ops[c.op] {
			continue
		}
		ops[c.op] = true
		for _, a := range answers {
			rec.set(a.status, a.body, a.header)
			_, serr := call(sdk, c.op, c.in)
			_, lerr := call(lean, c.op, c.in)
			what := c.op + " " + a.body
			if serr == nil || lerr == nil {
				t.Fatalf("%s: SDK %v, lean %v", what, serr, lerr)
			}
			if s, l := apiError(t, serr), apiError(t, lerr); reflect.TypeOf(s) != reflect.TypeOf(l) || !reflect.DeepEqual(s, l) {
				t.Errorf("%s:\nSDK  %T %#v\nlean %T %#v", what, s, s, l, l)
			}
			var sop, lop *smithy.OperationError
			if !errors.As(serr, &sop) || !errors.As(lerr, &lop) || sop.ServiceID != lop.ServiceID || sop.OperationName != lop.OperationName {
				t.Errorf("%s: operation: SDK %v, lean %v", what, sop, lop)
			}
			var sre, lre *awshttp.ResponseError
			if !errors.As(serr, &sre) || !errors.As(lerr, &lre) || sre.HTTPStatusCode() != lre.HTTPStatusCode() || sre.ServiceRequestID() != lre.ServiceRequestID() {
				t.Errorf("%s: response: SDK %v, lean %v", what, sre, lre)
			}
		}
	}
	var qdne *types.QueueDoesNotExist
	rec.set(400, answers[0].body, queryErr)
	if _, err := lean.ReceiveMessage(context.Background(), minimalInput("ReceiveMessage").(*sqs.ReceiveMessageInput)); !errors.As(err, &qdne) || qdne.ErrorCode() != "AWS.SimpleQueueService.NonExistentQueue" {
		t.Errorf("QueueDoesNotExist: %v", err)
	}
}

// TestChecksumMismatch: a body whose MD5 is not the one SQS sent or
// answered fails the call as the SDK's does, with the same message, and
// is not retried (the SDK checks after its retry loop).
func TestChecksumMismatch(t *testing.T) {
	rec, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { o.Backoff = zeroBackoff{} })
	}
	lean, err := sqswire.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sdk := sqs.NewFromConfig(cfg)
	send := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: []types.SendMessageBatchRequestEntry{
		{Id: aws.String("0"), MessageBody: aws.String("x")}, {Id: aws.String("1"), MessageBody: aws.String("y")}}}
	for _, c := range []struct {
		op   string
		in   any
		body string
	}{
		{"ReceiveMessage", minimalInput("ReceiveMessage"), `{"Messages":[{"MessageId":"m0","ReceiptHandle":"h","Body":"x","MD5OfBody":"` + md5hex("y") + `"},{"MessageId":"m1","Body":"z","MD5OfBody":"00"}]}`},
		{"SendMessageBatch", send, `{"Successful":[{"Id":"0","MessageId":"m0","MD5OfMessageBody":"` + md5hex("x") + `"},{"Id":"1","MessageId":"m1","MD5OfMessageBody":"` + md5hex("x") + `"}]}`},
	} {
		rec.set(200, c.body, nil)
		rec.mu.Lock()
		before := len(rec.bodies)
		rec.mu.Unlock()
		_, serr := call(sdk, c.op, c.in)
		_, lerr := call(lean, c.op, c.in)
		if serr == nil || lerr == nil || serr.Error() != lerr.Error() {
			t.Errorf("%s:\nSDK  %v\nlean %v", c.op, serr, lerr)
		}
		if lerr != nil && !strings.Contains(lerr.Error(), "has invalid checksum") {
			t.Errorf("%s: %v", c.op, lerr)
		}
		var ce *sqswire.BatchChecksumError
		if !errors.As(lerr, &ce) {
			t.Errorf("%s: %T is no BatchChecksumError", c.op, lerr)
		}
		rec.mu.Lock()
		if n := len(rec.bodies) - before; n != 2 {
			t.Errorf("%s: %d requests for both clients, want 2 (no retry)", c.op, n)
		}
		rec.mu.Unlock()
	}
}

type zeroBackoff struct{}

func (zeroBackoff) BackoffDelay(int, error) (time.Duration, error) { return 0, nil }

// TestRetries: the config's retryer retries a 5xx and a throttle as for
// the SDK's client, with the same number of requests and the attempt
// header; a 4xx that is no throttle is not retried.
func TestRetries(t *testing.T) {
	for _, c := range []struct {
		name      string
		status    int
		body      string
		failFirst int
		wantErr   bool
	}{
		{"500 then answer", 200, `{}`, 2, false},
		{"500 to the end", 200, `{}`, 5, true},
		{"throttled", 400, `{"__type":"com.amazonaws.sqs#RequestThrottled","message":"slow"}`, 0, true},
		{"queue gone", 400, `{"__type":"com.amazonaws.sqs#QueueDoesNotExist"}`, 0, true},
	} {
		counts := map[string]int{}
		var attempts string
		for _, which := range []string{"sdk", "lean"} {
			rec, srv := newRecorder(t)
			rec.set(c.status, c.body, nil)
			rec.failFirst = c.failFirst
			cfg := testConfig(srv.URL)
			cfg.Retryer = func() aws.Retryer {
				return retry.NewStandard(func(o *retry.StandardOptions) {
					o.Backoff = zeroBackoff{}
					o.MaxAttempts = 4
					o.RateLimiter = noLimit{}
				})
			}
			q, err := sqswire.ForQueues(cfg, map[string]string{"sdk": "sdk", "lean": ""}[which])
			if err != nil {
				t.Fatal(err)
			}
			_, err = q.DeleteMessageBatch(context.Background(), minimalInput("DeleteMessageBatch").(*sqs.DeleteMessageBatchInput))
			if (err != nil) != c.wantErr {
				t.Errorf("%s %s: %v", c.name, which, err)
			}
			rec.mu.Lock()
			counts[which] = len(rec.bodies)
			if which == "lean" {
				attempts = rec.headers[len(rec.headers)-1].Get("Amz-Sdk-Request")
			}
			rec.mu.Unlock()
		}
		if counts["sdk"] != counts["lean"] {
			t.Errorf("%s: requests: SDK %d, lean %d", c.name, counts["sdk"], counts["lean"])
		}
		if want := "attempt=" + string(rune('0'+counts["lean"])) + "; max=4"; attempts != want {
			t.Errorf("%s: last Amz-Sdk-Request %q, want %q", c.name, attempts, want)
		}
	}
}

type noLimit struct{}

func (noLimit) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (noLimit) AddTokens(uint) error { return nil }

// TestRefusals: per-call options, which the lean client cannot honour,
// and an unknown client choice are refused, naming why.
func TestRefusals(t *testing.T) {
	_, _, lean := pair(t)
	_, err := lean.ReceiveMessage(context.Background(), minimalInput("ReceiveMessage").(*sqs.ReceiveMessageInput), func(*sqs.Options) {})
	if err == nil || !strings.Contains(err.Error(), "per-call options") {
		t.Errorf("options: %v", err)
	}
	if _, err := sqswire.ForQueues(testConfig("http://127.0.0.1:1"), "fast"); err == nil || !strings.Contains(err.Error(), sqswire.EnvClient) {
		t.Errorf("choice fast: %v", err)
	}
	cfg := testConfig("http://127.0.0.1:1")
	cfg.Region = ""
	if _, err := sqswire.New(cfg); err == nil || !strings.Contains(err.Error(), "no region") {
		t.Errorf("no region: %v", err)
	}
}

// TestRequiredMembers: an input without a member the SDK requires is
// refused before anything is sent, with the SDK's error; a nil input is
// an empty one, as for the SDK.
func TestRequiredMembers(t *testing.T) {
	rec, sdk, lean := pair(t)
	q, id, h := aws.String(queueURL), aws.String("0"), aws.String("h")
	for _, c := range []struct {
		op string
		in any
	}{
		{"SendMessageBatch", &sqs.SendMessageBatchInput{}},
		{"SendMessageBatch", (*sqs.SendMessageBatchInput)(nil)},
		{"SendMessageBatch", &sqs.SendMessageBatchInput{QueueUrl: q, Entries: []types.SendMessageBatchRequestEntry{{Id: id, MessageBody: h}, {
			MessageAttributes:       map[string]types.MessageAttributeValue{"a": {StringValue: h}},
			MessageSystemAttributes: map[string]types.MessageSystemAttributeValue{"AWSTraceHeader": {StringValue: h}}}}}},
		{"ReceiveMessage", &sqs.ReceiveMessageInput{}},
		{"ReceiveMessage", (*sqs.ReceiveMessageInput)(nil)},
		{"DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: q}},
		{"DeleteMessageBatch", &sqs.DeleteMessageBatchInput{QueueUrl: q, Entries: []types.DeleteMessageBatchRequestEntry{{Id: id, ReceiptHandle: h}, {}}}},
		{"ChangeMessageVisibility", &sqs.ChangeMessageVisibilityInput{}},
		{"ChangeMessageVisibilityBatch", &sqs.ChangeMessageVisibilityBatchInput{Entries: []types.ChangeMessageVisibilityBatchRequestEntry{{ReceiptHandle: h}}}},
	} {
		rec.mu.Lock()
		before := len(rec.bodies)
		rec.mu.Unlock()
		_, serr := call(sdk, c.op, c.in)
		_, lerr := call(lean, c.op, c.in)
		var ip smithy.InvalidParamsError
		if serr == nil || lerr == nil || serr.Error() != lerr.Error() || !errors.As(lerr, &ip) {
			t.Errorf("%s %+v:\nSDK  %v\nlean %v", c.op, c.in, serr, lerr)
		}
		rec.mu.Lock()
		if n := len(rec.bodies) - before; n != 0 {
			t.Errorf("%s: %d requests sent", c.op, n)
		}
		rec.mu.Unlock()
	}
}
