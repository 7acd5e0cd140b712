package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

const maxAttempts = 3

// fakeAWS stands in for the endpoints: it answers every request with
// reply (by default an empty success) and records what it was sent. It
// models nothing of the services; the injector only needs a server that
// applies or not.
type fakeAWS struct {
	*httptest.Server
	mu     sync.Mutex
	hits   map[string]int
	bodies []map[string]any
	reply  func(op string, n int) (status int, body string)
}

func newFakeAWS(t *testing.T) *fakeAWS {
	t.Helper()
	f := &fakeAWS{hits: map[string]int{}}
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAWS) serve(w http.ResponseWriter, r *http.Request) {
	op := r.Header.Get("X-Amz-Target") // JSON protocols: "DynamoDB_20120810.UpdateItem"
	if _, after, ok := strings.Cut(op, "."); ok {
		op = after
	} else {
		op = r.Method + " " + r.URL.Path // S3
	}
	body, _ := io.ReadAll(r.Body)
	var doc map[string]any
	_ = json.Unmarshal(body, &doc)

	f.mu.Lock()
	f.hits[op]++
	n := f.hits[op]
	f.bodies = append(f.bodies, doc)
	reply := f.reply
	f.mu.Unlock()

	status, out := http.StatusOK, "{}"
	if reply != nil {
		status, out = reply(op, n)
	}
	if r.Header.Get("X-Amz-Target") != "" {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, out)
}

func (f *fakeAWS) hitCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[op]
}

func (f *fakeAWS) total() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, v := range f.hits {
		n += v
	}
	return n
}

// config is a static-credential config for the fake, with the standard
// retryer and no backoff.
func config(url string, attempts int) aws.Config {
	return aws.Config{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		BaseEndpoint: aws.String(url),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = attempts
				o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
			})
		},
	}
}

// clients are the three services' clients on one config.
type clients struct {
	db  *dynamodb.Client
	sqs *sqs.Client
	s3  *s3.Client
}

func setup(t *testing.T, attempts int, rules ...Rule) (*Injector, *fakeAWS, clients) {
	t.Helper()
	srv := newFakeAWS(t)
	inj := New(1, rules...)
	cfg := config(srv.URL, attempts)
	inj.Install(&cfg)
	return inj, srv, clients{
		db:  dynamodb.NewFromConfig(cfg),
		sqs: sqs.NewFromConfig(cfg),
		s3:  s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
	}
}

func transact(n int) *dynamodb.TransactWriteItemsInput {
	in := &dynamodb.TransactWriteItemsInput{}
	for k := range n {
		in.TransactItems = append(in.TransactItems, types.TransactWriteItem{Put: &types.Put{
			TableName: aws.String("t"),
			Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: fmt.Sprint("item", k)}},
		}})
	}
	return in
}

func update(cond bool) *dynamodb.UpdateItemInput {
	in := &dynamodb.UpdateItemInput{
		TableName:                 aws.String("t"),
		Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}},
		UpdateExpression:          aws.String("SET v = :v"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberN{Value: "1"}},
	}
	if cond {
		in.ConditionExpression = aws.String("attribute_not_exists(v)")
	}
	return in
}

// isRetryable and isThrottle classify err as the standard retryer does.
func isRetryable(err error) bool {
	return retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err) == aws.TrueTernary
}

func isThrottle(err error) bool {
	return retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func TestConflictTransactWriteItems(t *testing.T) {
	for _, n := range []int{1, 2, 5, 100} {
		t.Run(fmt.Sprint(n, " items"), func(t *testing.T) {
			inj, srv, c := setup(t, maxAttempts, Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: Conflict, Rate: 1})
			_, err := c.db.TransactWriteItems(context.Background(), transact(n))

			var tce *types.TransactionCanceledException
			if !errors.As(err, &tce) {
				t.Fatalf("err = %v, want a TransactionCanceledException", err)
			}
			codes := make([]string, len(tce.CancellationReasons))
			conflicts := 0
			for k, r := range tce.CancellationReasons {
				codes[k] = aws.ToString(r.Code)
				switch codes[k] {
				case "TransactionConflict":
					conflicts++
				case "None":
				default:
					t.Errorf("reason %d = %q", k, codes[k])
				}
			}
			if len(codes) != n || conflicts != 1 {
				t.Errorf("reasons = %v, want %d with one TransactionConflict", codes, n)
			}
			wantMsg := "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"
			if got := tce.ErrorMessage(); got != wantMsg {
				t.Errorf("message = %q, want %q", got, wantMsg)
			}
			// As from AWS: wrapped with status and request ID, and final.
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != 400 || !strings.HasPrefix(re.ServiceRequestID(), "FAULTINJECTED") {
				t.Errorf("response error = %+v", re)
			}
			if isRetryable(err) {
				t.Error("the retryer would retry a cancelled transaction")
			}
			if got := inj.Total(); got != 1 {
				t.Errorf("injected %d times, want 1 (no SDK retry)", got)
			}
			if srv.total() != 0 {
				t.Errorf("server saw %d requests, want none", srv.total())
			}
		})
	}
}

func TestConflictSingleItemWrites(t *testing.T) {
	inj, srv, c := setup(t, maxAttempts, Rule{Service: "DynamoDB", Kind: Conflict, Rate: 1})
	ctx := context.Background()
	key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
	calls := map[string]func() error{
		"UpdateItem": func() error { _, err := c.db.UpdateItem(ctx, update(false)); return err },
		"PutItem": func() error {
			_, err := c.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key})
			return err
		},
		"DeleteItem": func() error {
			_, err := c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("t"), Key: key})
			return err
		},
	}
	for op, call := range calls {
		err := call()
		var tce *types.TransactionConflictException
		if !errors.As(err, &tce) {
			t.Errorf("%s: err = %v, want a TransactionConflictException", op, err)
		}
		if isRetryable(err) {
			t.Errorf("%s: the retryer would retry it", op)
		}
	}
	// GetItem has no conflict: it goes through.
	if _, err := c.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("t"), Key: key}); err != nil {
		t.Errorf("GetItem: %v", err)
	}
	if inj.Total() != 3 || srv.total() != 1 {
		t.Errorf("injected %d, server saw %d; want 3 and 1", inj.Total(), srv.total())
	}
}

// errorCase is an error fault on one call, and how AWS's error for it looks.
type errorCase struct {
	name       string
	rule       Rule
	call       func(context.Context, clients) error
	wantCode   string
	wantStatus int
	wantType   func(error) bool // errors.As to the modelled type, if any
	throttle   bool
}

func ddbUpdate(ctx context.Context, c clients) error {
	_, err := c.db.UpdateItem(ctx, update(false))
	return err
}

func sqsDelete(ctx context.Context, c clients) error {
	_, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/1/q"), ReceiptHandle: aws.String("r")})
	return err
}

func s3Delete(ctx context.Context, c clients) error {
	_, err := c.s3.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	return err
}

func s3Head(ctx context.Context, c clients) error {
	_, err := c.s3.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("b"), Key: aws.String("k")})
	return err
}

func as[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

var errorCases = []errorCase{
	{name: "DynamoDB ProvisionedThroughputExceeded", rule: Rule{Service: "DynamoDB", Kind: Throttle, Code: "ProvisionedThroughputExceededException"},
		call: ddbUpdate, wantCode: "ProvisionedThroughputExceededException", wantStatus: 400, throttle: true,
		wantType: as[*types.ProvisionedThroughputExceededException]},
	{name: "DynamoDB Throttling", rule: Rule{Service: "DynamoDB", Kind: Throttle, Code: "ThrottlingException"},
		call: ddbUpdate, wantCode: "ThrottlingException", wantStatus: 400, throttle: true, wantType: as[*types.ThrottlingException]},
	{name: "SQS RequestThrottled", rule: Rule{Service: "SQS", Kind: Throttle, Code: "RequestThrottled"},
		call: sqsDelete, wantCode: "RequestThrottled", wantStatus: 400, throttle: true, wantType: as[*sqstypes.RequestThrottled]},
	{name: "SQS Throttling", rule: Rule{Service: "SQS", Kind: Throttle, Code: "ThrottlingException"},
		call: sqsDelete, wantCode: "ThrottlingException", wantStatus: 400, throttle: true},
	{name: "S3 SlowDown", rule: Rule{Service: "S3", Kind: Throttle},
		call: s3Delete, wantCode: "SlowDown", wantStatus: 503, throttle: true},
	// A HEAD response has no body, so on AWS the SDK sees only the 503:
	// retried by status, not counted as a throttle.
	{name: "S3 SlowDown on HEAD", rule: Rule{Service: "S3", Kind: Throttle},
		call: s3Head, wantCode: "ServiceUnavailable", wantStatus: 503},
	{name: "DynamoDB InternalServerError", rule: Rule{Service: "DynamoDB", Kind: ServerError, Code: "InternalServerError"},
		call: ddbUpdate, wantCode: "InternalServerError", wantStatus: 500, wantType: as[*types.InternalServerError]},
	{name: "DynamoDB ServiceUnavailable", rule: Rule{Service: "DynamoDB", Kind: ServerError, Code: "ServiceUnavailable"},
		call: ddbUpdate, wantCode: "ServiceUnavailable", wantStatus: 503},
	{name: "SQS InternalFailure", rule: Rule{Service: "SQS", Kind: ServerError, Code: "InternalFailure"},
		call: sqsDelete, wantCode: "InternalFailure", wantStatus: 500},
	{name: "S3 InternalError", rule: Rule{Service: "S3", Kind: ServerError, Code: "InternalError"},
		call: s3Delete, wantCode: "InternalError", wantStatus: 500},
	{name: "DynamoDB TransactionInProgress", rule: Rule{Service: "DynamoDB", Kind: InProgress},
		call: func(ctx context.Context, c clients) error {
			_, err := c.db.TransactWriteItems(ctx, transact(2))
			return err
		}, wantCode: "TransactionInProgressException", wantStatus: 400, throttle: true,
		wantType: as[*types.TransactionInProgressException]},
}

// TestErrorFaultsExhaustRetries: a fault on every attempt uses up the
// retryer's attempts, and the error the caller gets is AWS's: the
// modelled type, the code, the status, classified as AWS's would be.
func TestErrorFaultsExhaustRetries(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule
			r.Rate = 1
			inj, srv, c := setup(t, maxAttempts, r)
			err := tc.call(context.Background(), c)

			var mae *retry.MaxAttemptsError
			if !errors.As(err, &mae) || mae.Attempt != maxAttempts {
				t.Fatalf("err = %v, want the retryer to give up after %d attempts", err, maxAttempts)
			}
			if got := apiCode(err); got != tc.wantCode {
				t.Errorf("code = %q, want %q", got, tc.wantCode)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != tc.wantStatus {
				t.Errorf("status = %v, want %d", re, tc.wantStatus)
			}
			if tc.wantType != nil && !tc.wantType(err) {
				t.Errorf("err %T %v is not the modelled type", errors.Unwrap(err), err)
			}
			if got := isThrottle(err); got != tc.throttle {
				t.Errorf("throttle = %v, want %v", got, tc.throttle)
			}
			if !isRetryable(err) {
				t.Error("not retryable")
			}
			if inj.Total() != maxAttempts || srv.total() != 0 {
				t.Errorf("injected %d, server saw %d; want %d and 0", inj.Total(), srv.total(), maxAttempts)
			}
		})
	}
}

// TestErrorFaultsRetriedToSuccess: fewer faults than attempts, and the
// SDK's retry gets through to the server.
func TestErrorFaultsRetriedToSuccess(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rule
			r.Count = maxAttempts - 1
			inj, srv, c := setup(t, maxAttempts, r)
			srv.reply = func(op string, _ int) (int, string) {
				if strings.HasPrefix(op, "DELETE") {
					return http.StatusNoContent, ""
				}
				return http.StatusOK, "{}"
			}
			if err := tc.call(context.Background(), c); err != nil {
				t.Fatalf("err = %v, want the retry to succeed", err)
			}
			if inj.Total() != maxAttempts-1 || srv.total() != 1 {
				t.Errorf("injected %d, server saw %d; want %d and 1", inj.Total(), srv.total(), maxAttempts-1)
			}
		})
	}
}

const ccf = `{"__type":"com.amazonaws.dynamodb.v20120810#ConditionalCheckFailedException","message":"The conditional request failed"}`

func TestLost(t *testing.T) {
	ctx := context.Background()

	t.Run("conditional write sees its own write", func(t *testing.T) {
		inj, srv, c := setup(t, maxAttempts, Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: Lost, Count: 1})
		// The first request applies; the retry's condition then fails, as
		// on DynamoDB.
		srv.reply = func(_ string, n int) (int, string) {
			if n == 1 {
				return http.StatusOK, "{}"
			}
			return http.StatusBadRequest, ccf
		}
		_, err := c.db.UpdateItem(ctx, update(true))
		if !as[*types.ConditionalCheckFailedException](err) {
			t.Fatalf("err = %v, want the retry's ConditionalCheckFailedException", err)
		}
		if srv.hitCount("UpdateItem") != 2 || inj.Total() != 1 {
			t.Errorf("server saw %d, injected %d; want 2 and 1", srv.hitCount("UpdateItem"), inj.Total())
		}
	})

	t.Run("transaction retried with the same token", func(t *testing.T) {
		inj, srv, c := setup(t, maxAttempts, Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: Lost, Count: 1})
		if _, err := c.db.TransactWriteItems(ctx, transact(3)); err != nil {
			t.Fatalf("err = %v, want the retry to succeed", err)
		}
		if len(srv.bodies) != 2 || inj.Total() != 1 {
			t.Fatalf("server saw %d, injected %d; want 2 and 1", len(srv.bodies), inj.Total())
		}
		first, second := srv.bodies[0]["ClientRequestToken"], srv.bodies[1]["ClientRequestToken"]
		if first == nil || first != second {
			t.Errorf("tokens %v and %v, want the same one twice", first, second)
		}
	})

	t.Run("every attempt lost", func(t *testing.T) {
		inj, srv, c := setup(t, maxAttempts, Rule{Kind: Lost, Rate: 1})
		_, err := c.db.UpdateItem(ctx, update(false))
		var mae *retry.MaxAttemptsError
		if !errors.As(err, &mae) || mae.Attempt != maxAttempts {
			t.Fatalf("err = %v, want the retryer to give up after %d attempts", err, maxAttempts)
		}
		// What net/http and smithy give for a reset, which the retryer
		// retries as a connection error.
		var send *smithyhttp.RequestSendError
		if !errors.As(err, &send) || !errors.Is(err, syscall.ECONNRESET) || !strings.Contains(err.Error(), "connection reset") {
			t.Errorf("err = %v, want a connection reset", err)
		}
		if (retry.RetryableConnectionError{}).IsErrorRetryable(err) != aws.TrueTernary {
			t.Error("RetryableConnectionError does not retry it")
		}
		if srv.total() != maxAttempts || inj.Total() != maxAttempts {
			t.Errorf("server saw %d, injected %d; want %d each", srv.total(), inj.Total(), maxAttempts)
		}
	})

	t.Run("errors are not lost", func(t *testing.T) {
		inj, srv, c := setup(t, maxAttempts, Rule{Kind: Lost, Count: 1})
		srv.reply = func(string, int) (int, string) { return http.StatusBadRequest, ccf }
		_, err := c.db.UpdateItem(ctx, update(true))
		if !as[*types.ConditionalCheckFailedException](err) || srv.total() != 1 || inj.Total() != 0 {
			t.Fatalf("err = %v, server saw %d, injected %d; want the error as sent, 1, 0", err, srv.total(), inj.Total())
		}
		// The unused Count is still there for the next success.
		srv.reply = nil
		if _, err := c.db.UpdateItem(ctx, update(false)); err != nil || inj.Total() != 1 {
			t.Errorf("err = %v, injected %d; want a lost success, retried", err, inj.Total())
		}
	})

	t.Run("S3 and SQS", func(t *testing.T) {
		inj, srv, c := setup(t, maxAttempts, Rule{Service: "S3", Kind: Lost, Count: 1}, Rule{Service: "SQS", Kind: Lost, Count: 1})
		srv.reply = func(op string, _ int) (int, string) {
			if strings.HasPrefix(op, "DELETE") {
				return http.StatusNoContent, ""
			}
			return http.StatusOK, "{}"
		}
		if err := s3Delete(ctx, c); err != nil {
			t.Fatal(err)
		}
		if err := sqsDelete(ctx, c); err != nil {
			t.Fatal(err)
		}
		if srv.total() != 4 || inj.Total() != 2 {
			t.Errorf("server saw %d, injected %d; want 4 and 2", srv.total(), inj.Total())
		}
	})
}

// outcomes runs n single-attempt transactions and describes each result.
func outcomes(t *testing.T, seed int64, n int) []string {
	t.Helper()
	srv := newFakeAWS(t)
	inj := New(seed,
		Rule{Service: "DynamoDB", Kind: Throttle, Rate: 0.2},
		Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: Conflict, Rate: 0.3},
	)
	cfg := config(srv.URL, 1)
	inj.Install(&cfg)
	db := dynamodb.NewFromConfig(cfg)
	var out []string
	for range n {
		_, err := db.TransactWriteItems(context.Background(), transact(4))
		var tce *types.TransactionCanceledException
		switch {
		case errors.As(err, &tce):
			var codes []string
			for _, r := range tce.CancellationReasons {
				codes = append(codes, aws.ToString(r.Code))
			}
			out = append(out, strings.Join(codes, "/"))
		case err != nil:
			out = append(out, apiCode(err))
		default:
			out = append(out, "ok")
		}
	}
	return out
}

func TestDeterministic(t *testing.T) {
	const n = 200
	a, b, other := outcomes(t, 7, n), outcomes(t, 7, n), outcomes(t, 8, n)
	if strings.Join(a, " ") != strings.Join(b, " ") {
		t.Errorf("same seed, different faults:\n%v\n%v", a, b)
	}
	if strings.Join(a, " ") == strings.Join(other, " ") {
		t.Error("different seeds, same faults")
	}
	seen := map[string]int{}
	for _, o := range a {
		seen[o]++
	}
	// 20% throttles, then 30% of the rest conflicts: about 40, 48, 112.
	throttles := seen["ProvisionedThroughputExceededException"] + seen["ThrottlingException"]
	conflicts := n - throttles - seen["ok"]
	if throttles < 20 || throttles > 60 || conflicts < 28 || conflicts > 70 {
		t.Errorf("outcomes %v: rates far from the rules'", seen)
	}
	if len(seen) < 6 { // both throttle codes, ok, and conflicts on several items
		t.Errorf("outcomes %v: want the variants and items spread", seen)
	}
}

func TestMatchTargetsOneCall(t *testing.T) {
	commit := func(op string, input any) bool {
		in, ok := input.(*dynamodb.TransactWriteItemsInput)
		return ok && len(in.TransactItems) == 2
	}
	inj, srv, c := setup(t, maxAttempts, Rule{Service: "DynamoDB", Kind: Conflict, Rate: 1, Match: commit})
	ctx := context.Background()
	for _, n := range []int{1, 3, 2, 4, 2} {
		_, err := c.db.TransactWriteItems(ctx, transact(n))
		if got, want := as[*types.TransactionCanceledException](err), n == 2; got != want {
			t.Errorf("%d items: cancelled %v, want %v (err %v)", n, got, want, err)
		}
	}
	if inj.Total() != 2 || srv.total() != 3 {
		t.Errorf("injected %d, server saw %d; want 2 and 3", inj.Total(), srv.total())
	}
}

func TestOnceAndAdd(t *testing.T) {
	inj, srv, c := setup(t, maxAttempts)
	ctx := context.Background()
	if err := ddbUpdate(ctx, c); err != nil || inj.Total() != 0 {
		t.Fatalf("no rules: err %v, injected %d", err, inj.Total())
	}
	inj.Once(Rule{Service: "DynamoDB", Operation: "UpdateItem", Kind: Lost})
	for range 3 {
		if err := ddbUpdate(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if inj.Total() != 1 || srv.total() != 5 {
		t.Errorf("injected %d, server saw %d; want 1 and 5", inj.Total(), srv.total())
	}
}

func TestSetEnabled(t *testing.T) {
	inj, srv, c := setup(t, maxAttempts, Rule{Kind: Throttle, Rate: 1})
	ctx := context.Background()
	inj.SetEnabled(false)
	if err := ddbUpdate(ctx, c); err != nil || inj.Total() != 0 || srv.total() != 1 {
		t.Fatalf("disabled: err %v, injected %d, server saw %d", err, inj.Total(), srv.total())
	}
	inj.SetEnabled(true)
	if err := ddbUpdate(ctx, c); !isThrottle(err) {
		t.Fatalf("enabled: err %v, want a throttle", err)
	}
}

func TestCountsAndString(t *testing.T) {
	inj, _, c := setup(t, maxAttempts,
		Rule{Service: "DynamoDB", Operation: "TransactWriteItems", Kind: Conflict, Count: 2},
		Rule{Service: "S3", Kind: Throttle, Rate: 1},
	)
	ctx := context.Background()
	for range 3 {
		_, _ = c.db.TransactWriteItems(ctx, transact(2))
	}
	_ = s3Delete(ctx, c)
	want := map[string]int{"DynamoDB.TransactWriteItems conflict": 2, "S3.DeleteObject throttle": maxAttempts}
	got := inj.Counts()
	if fmt.Sprint(got) != fmt.Sprint(want) || inj.Total() != 2+maxAttempts {
		t.Errorf("counts %v total %d, want %v", got, inj.Total(), want)
	}
	s := inj.String()
	for _, w := range []string{"seed 1", "DynamoDB.TransactWriteItems conflict  2", "S3.DeleteObject throttle", "DynamoDB.TransactWriteItems:conflict=1#2 (fired 2)"} {
		if !strings.Contains(s, w) {
			t.Errorf("String() lacks %q:\n%s", w, s)
		}
	}
	t.Log("\n" + s)
}

func TestConcurrentCountIsExact(t *testing.T) {
	inj, srv, c := setup(t, 1, Rule{Kind: Lost, Count: 5})
	var wg sync.WaitGroup
	for range 40 {
		wg.Go(func() { _ = ddbUpdate(context.Background(), c) })
	}
	wg.Wait()
	if inj.Total() != 5 || srv.total() != 40 {
		t.Errorf("injected %d, server saw %d; want 5 and 40", inj.Total(), srv.total())
	}
}

func TestInstall(t *testing.T) {
	srv := newFakeAWS(t)
	cfg := config(srv.URL, maxAttempts)

	var none *Injector
	none.Install(&cfg)
	none.SetEnabled(true)
	if len(cfg.APIOptions) != 0 || none.Total() != 0 || none.String() != "faults: off" {
		t.Fatal("a nil injector is not inert")
	}

	// Twice on one config still means one fault per attempt; a second
	// injector adds its own.
	a := New(1, Rule{Kind: Throttle, Rate: 1, Count: 1})
	b := New(2, Rule{Kind: Throttle, Rate: 1, Count: 1})
	a.Install(&cfg)
	a.Install(&cfg)
	b.Install(&cfg)
	if err := ddbUpdate(context.Background(), clients{db: dynamodb.NewFromConfig(cfg)}); err != nil {
		t.Fatal(err)
	}
	if a.Total() != 1 || b.Total() != 1 || srv.total() != 1 {
		t.Errorf("injected %d and %d, server saw %d; want 1, 1, 1", a.Total(), b.Total(), srv.total())
	}
}

func TestNewPanicsOnRuleThatCannotFire(t *testing.T) {
	for _, r := range []Rule{
		{Kind: "drop", Rate: 1},
		{Kind: Throttle, Rate: 2},
		{Service: "SQS", Kind: Conflict, Rate: 1},
		{Service: "DynamoDB", Operation: "GetItem", Kind: Conflict, Rate: 1},
		{Service: "S3", Kind: Throttle, Code: "ProvisionedThroughputExceededException", Rate: 1},
		{Service: "[", Kind: Lost, Rate: 1},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New accepted %s", r)
				}
			}()
			New(1, r)
		}()
	}
}
