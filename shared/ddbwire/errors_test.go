package ddbwire_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/ddbwire"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/batchwork/batchwork/shared/awsconf"
)

const ns = "com.amazonaws.dynamodb.v20120810#"

// TestErrorsMatchSDK: each error answer comes back as the SDK's error for
// it: the same type with the same members (a condition's item, a
// cancellation's reasons), the same code and message, the same HTTP
// status and request ID, and the same retry classification by the
// control plane's retryer.
func TestErrorsMatchSDK(t *testing.T) {
	rec, sdk, lean := pair(t)
	retryer := awsconf.NewRetryer()
	for _, c := range []struct {
		name   string
		status int
		body   string
		op     string
	}{
		{"condition with item", 400, `{"__type":"` + ns + `ConditionalCheckFailedException","message":"The conditional request failed","Item":{"pk":{"S":"a"},"n":{"N":"3"}}}`, "UpdateItem"},
		{"condition", 400, `{"__type":"` + ns + `ConditionalCheckFailedException","Message":"The conditional request failed"}`, "PutItem"},
		{"cancelled", 400, `{"__type":"` + ns + `TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [None, ConditionalCheckFailed, TransactionConflict]","CancellationReasons":[{"Code":"None"},{"Code":"ConditionalCheckFailed","Message":"The conditional request failed","Item":{"pk":{"S":"a"}}},{"Code":"TransactionConflict","Message":"Transaction is ongoing for the item"}]}`, "TransactWriteItems"},
		{"throughput", 400, `{"__type":"` + ns + `ProvisionedThroughputExceededException","message":"The level of configured provisioned throughput for the table was exceeded.","ThrottlingReasons":[{"reason":"TableReadProvisionedThroughputExceeded","resource":"arn:t"}]}`, "GetItem"},
		{"throttling", 400, `{"__type":"com.amazon.coral.availability#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`, "Query"},
		{"request limit", 400, `{"__type":"` + ns + `RequestLimitExceeded","message":"Throughput exceeds the current throughput limit for your account."}`, "BatchGetItem"},
		{"not found", 400, `{"__type":"` + ns + `ResourceNotFoundException","message":"Requested resource not found"}`, "GetItem"},
		{"validation", 400, `{"__type":"com.amazon.coral.validate#ValidationException","message":"One or more parameter values were invalid"}`, "UpdateItem"},
		{"conflict", 400, `{"__type":"` + ns + `TransactionConflictException","message":"Transaction is ongoing for the item"}`, "UpdateItem"},
		{"in progress", 400, `{"__type":"` + ns + `TransactionInProgressException","message":"Transaction is in progress"}`, "TransactWriteItems"},
		{"idempotent mismatch", 400, `{"__type":"` + ns + `IdempotentParameterMismatchException","message":"different parameters"}`, "TransactWriteItems"},
		{"collection size", 400, `{"__type":"` + ns + `ItemCollectionSizeLimitExceededException","message":"too big"}`, "PutItem"},
		{"replicated conflict", 400, `{"__type":"` + ns + `ReplicatedWriteConflictException","message":"replica"}`, "PutItem"},
		{"internal", 500, `{"__type":"` + ns + `InternalServerError","message":"Internal server error"}`, "GetItem"},
		{"unavailable", 503, `{"__type":"` + ns + `ServiceUnavailable","message":"Service unavailable"}`, "GetItem"},
		{"access denied", 400, `{"__type":"com.amazon.coral.service#AccessDeniedException","Message":"not authorized"}`, "Query"},
		{"code member", 400, `{"code":"SomethingElse","message":"m"}`, "GetItem"},
		{"no body", 500, ``, "GetItem"},
		{"no code", 400, `{}`, "GetItem"},
		{"bad body", 400, `{"__type":`, "GetItem"},
	} {
		rec.set(c.status, c.body)
		_, serr := call(sdk, c.op, minimalInput(c.op))
		_, lerr := call(lean, c.op, minimalInput(c.op))
		if serr == nil || lerr == nil {
			t.Fatalf("%s: SDK %v, lean %v", c.name, serr, lerr)
		}
		var sAPI, lAPI smithy.APIError
		sOK, lOK := errors.As(serr, &sAPI), errors.As(lerr, &lAPI)
		if sOK != lOK {
			t.Errorf("%s: an API error: SDK %v (%v), lean %v (%v)", c.name, sOK, serr, lOK, lerr)
			continue
		}
		if sOK {
			if reflect.TypeOf(sAPI) != reflect.TypeOf(lAPI) || !reflect.DeepEqual(sAPI, lAPI) {
				t.Errorf("%s:\nSDK  %T %+v\nlean %T %+v", c.name, sAPI, sAPI, lAPI, lAPI)
			}
			if sAPI.ErrorCode() != lAPI.ErrorCode() || sAPI.ErrorMessage() != lAPI.ErrorMessage() || sAPI.ErrorFault() != lAPI.ErrorFault() {
				t.Errorf("%s: code/message/fault SDK %q %q %v, lean %q %q %v", c.name, sAPI.ErrorCode(), sAPI.ErrorMessage(), sAPI.ErrorFault(), lAPI.ErrorCode(), lAPI.ErrorMessage(), lAPI.ErrorFault())
			}
		} else {
			var sd, ld *smithy.DeserializationError
			if errors.As(serr, &sd) != errors.As(lerr, &ld) {
				t.Errorf("%s: deserialization error: SDK %v, lean %v", c.name, serr, lerr)
			}
		}
		var sResp, lResp *awshttp.ResponseError
		if !errors.As(serr, &sResp) || !errors.As(lerr, &lResp) || sResp.HTTPStatusCode() != lResp.HTTPStatusCode() || sResp.ServiceRequestID() != lResp.ServiceRequestID() {
			t.Errorf("%s: response error: SDK %v, lean %v", c.name, serr, lerr)
		}
		var sOp, lOp *smithy.OperationError
		if !errors.As(lerr, &lOp) || !errors.As(serr, &sOp) || sOp.Service() != lOp.Service() || sOp.Operation() != lOp.Operation() {
			t.Errorf("%s: operation error: SDK %v, lean %v", c.name, serr, lerr)
		}
		if s, l := retryer.IsErrorRetryable(serr), retryer.IsErrorRetryable(lerr); s != l {
			t.Errorf("%s: retryable: SDK %v, lean %v", c.name, s, l)
		}
	}
}

// failing is a hook that answers the first attempts itself: with a
// connection reset (as a lost answer), a throttle, or a 500.
type failing struct {
	answers []func(*http.Request) (*http.Response, error)
	calls   int
	seen    []string
}

func (f *failing) Call(ctx context.Context, c *ddbwire.Call, next func(context.Context) error) error {
	f.calls++
	return next(ctx)
}

func (f *failing) Attempt(ctx context.Context, c *ddbwire.Call, req *http.Request, send ddbwire.Send) (*http.Response, error) {
	f.seen = append(f.seen, req.Header.Get("Amz-Sdk-Request"))
	if len(f.answers) == 0 {
		return send(req)
	}
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a(req)
}

func reset(req *http.Request) (*http.Response, error) {
	return nil, &url.Error{Op: "Post", URL: req.URL.String(), Err: &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}}
}

func lost(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	return reset(req)
}

func answer(status int, body string) func(*http.Request) (*http.Response, error) {
	return func(req *http.Request) (*http.Response, error) {
		rec := &recorder{status: status, answer: body, failFirst: -1}
		w := newResponseWriter()
		rec.ServeHTTP(w, req)
		return w.response(), nil
	}
}

// TestRetries: the control plane's retryer's rules, through the lean
// client: connection errors, lost answers, throttles and 5xx are retried
// (the server sees the lost attempt's request), a condition failure is
// not, and the attempts stop at the retryer's limit.
func TestRetries(t *testing.T) {
	rec, srv := newRecorder(t)
	cfg := testConfig(srv.URL)
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 4
			o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	}
	throttle := answer(400, `{"__type":"`+ns+`ProvisionedThroughputExceededException","message":"slow"}`)
	internal := answer(500, `{"__type":"`+ns+`InternalServerError","message":"boom"}`)
	conditional := answer(400, `{"__type":"`+ns+`ConditionalCheckFailedException","message":"no"}`)
	for _, c := range []struct {
		name     string
		answers  []func(*http.Request) (*http.Response, error)
		wantErr  any
		attempts int
		sent     int // requests the server got
	}{
		{"reset then ok", []func(*http.Request) (*http.Response, error){reset}, nil, 2, 1},
		{"lost then ok", []func(*http.Request) (*http.Response, error){lost}, nil, 2, 2},
		{"throttle, 500, ok", []func(*http.Request) (*http.Response, error){throttle, internal}, nil, 3, 1},
		{"condition", []func(*http.Request) (*http.Response, error){conditional}, new(*types.ConditionalCheckFailedException), 1, 0},
		{"attempts run out", []func(*http.Request) (*http.Response, error){internal, internal, internal, internal, internal}, new(*retry.MaxAttemptsError), 4, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec.mu.Lock()
			rec.bodies = nil
			rec.mu.Unlock()
			h := &failing{answers: c.answers}
			cfg := cfg
			ddbwire.Install(&cfg, h)
			lean, err := ddbwire.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			_, err = lean.UpdateItem(context.Background(), benchUpdate())
			switch {
			case c.wantErr == nil && err != nil:
				t.Fatalf("error %v", err)
			case c.wantErr != nil && !errors.As(err, c.wantErr):
				t.Fatalf("error %v, want %T", err, c.wantErr)
			}
			if h.calls != 1 || len(h.seen) != c.attempts || len(rec.bodies) != c.sent {
				t.Fatalf("calls %d, attempts %v, sent %d; want 1, %d, %d", h.calls, h.seen, len(rec.bodies), c.attempts, c.sent)
			}
		})
	}
}
