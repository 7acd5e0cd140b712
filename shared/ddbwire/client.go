// Package ddbwire is a lean DynamoDB client: the seven operations the store
// calls (shared/dynamo's API port), with the SDK's input, output and error
// types, sent as AWS JSON 1.0 through the config's HTTP client, signed
// with the SDK's SigV4 signer and retried by the config's retryer, without
// the SDK's middleware stack. The stack cost a no-op task about a third of
// the control plane's CPU (docs/performance.md); what it did that the
// store needs is here: the endpoint as the config resolves it, cached
// credentials, the payload hash, Accept-Encoding identity, the response's
// CRC32, the retry loop and its tokens, the typed errors, an idempotency
// token on every transaction, and hooks (hook.go) that see every call and
// attempt as the SDK's middleware saw them.
package ddbwire

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Client is the lean client. Its methods are safe for concurrent use.
type Client struct {
	http     aws.HTTPClient
	creds    aws.CredentialsProvider // nil: requests go unsigned
	signer   *v4.Signer
	endpoint string
	host     string
	region   string
	retryer  aws.RetryerV2
	hooks    []Hook
	// inLambda: AWS_LAMBDA_FUNCTION_NAME is set (trace.go).
	inLambda bool
}

// New builds a client from cfg as dynamodb.NewFromConfig would build the
// SDK's: the same endpoint (BaseEndpoint, AWS_ENDPOINT_URL_DYNAMODB and the
// config's service endpoints, else the regional endpoint), credentials
// (cached), HTTP client and retryer. Its hooks are cfg's (Install).
func New(cfg aws.Config) (*Client, error) {
	o := dynamodb.NewFromConfig(cfg).Options()
	if o.Region == "" {
		return nil, errors.New("ddbwire: the config has no region")
	}
	if cfg.EndpointResolverWithOptions != nil || cfg.EndpointResolver != nil { //nolint:staticcheck // refused, not used
		return nil, errors.New("ddbwire: a custom endpoint resolver is not supported (set BaseEndpoint, or BATCHWORK_DYNAMO_CLIENT=sdk)")
	}
	if o.EndpointOptions.UseFIPSEndpoint == aws.FIPSEndpointStateEnabled || o.EndpointOptions.UseDualStackEndpoint == aws.DualStackEndpointStateEnabled {
		return nil, errors.New("ddbwire: FIPS and dual-stack endpoints are not supported")
	}
	// The SDK's endpoint rules, once: the partition's domain
	// (amazonaws.com.cn, c2s.ic.gov, ...), and a base endpoint's path
	// kept as the SDK sends it (smithyhttp.JoinPath(path, "/")).
	ep, err := o.EndpointResolverV2.ResolveEndpoint(context.Background(), dynamodb.EndpointParameters{
		Region: aws.String(o.Region), Endpoint: o.BaseEndpoint, UseFIPS: aws.Bool(false), UseDualStack: aws.Bool(false),
		AccountIdEndpointMode: aws.String(string(aws.AccountIDEndpointModeDisabled)),
	})
	if err != nil {
		return nil, fmt.Errorf("ddbwire: endpoint: %w", err)
	}
	u := ep.URI
	u.Path, u.RawPath = smithyhttp.JoinPath(u.Path, "/"), ""
	endpoint := u.String()
	req, err := http.NewRequest(http.MethodPost, endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("ddbwire: endpoint %q: %w", endpoint, err)
	}
	c := &Client{
		http:     o.HTTPClient,
		signer:   v4.NewSigner(),
		endpoint: endpoint,
		host:     req.URL.Host,
		region:   o.Region,
		retryer:  retryerV2(o.Retryer),
		hooks:    Hooks(cfg),
		inLambda: lookup("AWS_LAMBDA_FUNCTION_NAME"),
	}
	if o.Credentials != nil && !aws.IsCredentialsProvider(o.Credentials, aws.AnonymousCredentials{}) {
		c.creds = o.Credentials
		// Cached as config.LoadDefaultConfig caches them: a provider
		// passed in bare would be asked on every request.
		if _, ok := c.creds.(*aws.CredentialsCache); !ok {
			c.creds = aws.NewCredentialsCache(c.creds)
		}
	}
	return c, nil
}

func noOptions(op string, optFns []func(*dynamodb.Options)) error {
	if len(optFns) > 0 {
		return unsupported(op + "'s per-call options")
	}
	return nil
}

// GetItem is dynamodb.Client.GetItem.
func (c *Client) GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := c.do(ctx, "GetItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.GetItemOutput), nil
}

// PutItem is dynamodb.Client.PutItem.
func (c *Client) PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	out, err := c.do(ctx, "PutItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.PutItemOutput), nil
}

// UpdateItem is dynamodb.Client.UpdateItem.
func (c *Client) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := c.do(ctx, "UpdateItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.UpdateItemOutput), nil
}

// Query is dynamodb.Client.Query.
func (c *Client) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.do(ctx, "Query", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.QueryOutput), nil
}

// BatchGetItem is dynamodb.Client.BatchGetItem.
func (c *Client) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	out, err := c.do(ctx, "BatchGetItem", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.BatchGetItemOutput), nil
}

// TransactWriteItems is dynamodb.Client.TransactWriteItems. A transaction
// without a ClientRequestToken gets a random one, as from the SDK, so
// that its retries are idempotent.
func (c *Client) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := c.do(ctx, "TransactWriteItems", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.TransactWriteItemsOutput), nil
}

// BatchExecuteStatement is dynamodb.Client.BatchExecuteStatement.
func (c *Client) BatchExecuteStatement(ctx context.Context, in *dynamodb.BatchExecuteStatementInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	out, err := c.do(ctx, "BatchExecuteStatement", in, optFns)
	if err != nil {
		return nil, err
	}
	return out.(*dynamodb.BatchExecuteStatementOutput), nil
}

// do runs one operation through the hooks; an error comes back as the
// SDK's does, in a *smithy.OperationError.
func (c *Client) do(ctx context.Context, op string, in any, optFns []func(*dynamodb.Options)) (any, error) {
	err := noOptions(op, optFns)
	call := &Call{Service: "DynamoDB", Operation: op, Input: in}
	if err == nil {
		err = c.run(ctx, call, 0)
	}
	if err != nil {
		return nil, &smithy.OperationError{ServiceID: "DynamoDB", OperationName: op, Err: err}
	}
	return call.Output, nil
}

func (c *Client) run(ctx context.Context, call *Call, i int) error {
	if i < len(c.hooks) {
		return c.hooks[i].Call(ctx, call, func(ctx context.Context) error { return c.run(ctx, call, i+1) })
	}
	out, err := c.invoke(ctx, call)
	if err == nil {
		call.Output = out
	}
	return err
}

// encode writes the call's input, once for all its attempts.
func encode(call *Call) ([]byte, error) {
	e := &enc{b: make([]byte, 0, 512)}
	var err error
	switch in := call.Input.(type) {
	case *dynamodb.GetItemInput:
		err = encodeGetItem(e, in)
	case *dynamodb.PutItemInput:
		err = encodePutItem(e, in)
	case *dynamodb.UpdateItemInput:
		err = encodeUpdateItem(e, in)
	case *dynamodb.QueryInput:
		err = encodeQuery(e, in)
	case *dynamodb.BatchGetItemInput:
		err = encodeBatchGetItem(e, in)
	case *dynamodb.TransactWriteItemsInput:
		token := aws.ToString(in.ClientRequestToken)
		if in.ClientRequestToken == nil {
			token = newToken()
		}
		err = encodeTransactWriteItems(e, in, token)
	case *dynamodb.BatchExecuteStatementInput:
		err = encodeBatchExecuteStatement(e, in)
	default:
		return nil, fmt.Errorf("ddbwire: %s with input %T", call.Operation, call.Input)
	}
	if err != nil {
		return nil, fmt.Errorf("ddbwire: %s: %w", call.Operation, err)
	}
	return e.b, nil
}

func decode(op string, body []byte) (any, error) {
	d := &dec{b: body}
	var out any
	switch op {
	case "GetItem":
		out = decodeGetItem(d)
	case "PutItem":
		o := &dynamodb.PutItemOutput{}
		o.Attributes, o.ConsumedCapacity, o.ItemCollectionMetrics = decodeWrite(d)
		out = o
	case "UpdateItem":
		o := &dynamodb.UpdateItemOutput{}
		o.Attributes, o.ConsumedCapacity, o.ItemCollectionMetrics = decodeWrite(d)
		out = o
	case "Query":
		out = decodeQuery(d)
	case "BatchGetItem":
		out = decodeBatchGetItem(d)
	case "TransactWriteItems":
		out = decodeTransactWriteItems(d)
	case "BatchExecuteStatement":
		out = decodeBatchExecuteStatement(d)
	}
	d.end()
	if d.err != nil {
		return nil, &smithy.DeserializationError{Err: fmt.Errorf("ddbwire: %s response: %w", op, d.err), Snapshot: snapshot(body)}
	}
	return out, nil
}

// newToken is a random UUID, as the SDK's idempotency tokens are.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// invoke sends the call with the retry loop of the SDK's retry middleware
// (aws/retry.Attempt): an attempt token per attempt, the retryer's
// classification, its attempt limit (then *retry.MaxAttemptsError), a
// retry token and its delay before each retry.
func (c *Client) invoke(ctx context.Context, call *Call) (any, error) {
	body, err := encode(call)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	maxAttempts := c.retryer.MaxAttempts()
	releaseRetry := func(error) error { return nil }
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		releaseAttempt, err := c.retryer.GetAttemptToken(ctx)
		if err != nil {
			return nil, fmt.Errorf("failed to get retry Send token, %w", err)
		}
		out, err := c.attempt(ctx, call, body, hash, attempt, maxAttempts)
		if rerr := releaseRetry(err); rerr != nil && err != nil {
			return nil, fmt.Errorf("failed to release retry token after request error, %w", err)
		}
		if rerr := releaseAttempt(err); rerr != nil && err != nil {
			return nil, fmt.Errorf("failed to release initial token after request error, %w", err)
		}
		if err == nil {
			return out, nil
		}
		if !c.retryer.IsErrorRetryable(err) {
			return nil, err
		}
		if maxAttempts > 0 && attempt >= maxAttempts {
			return nil, &retry.MaxAttemptsError{Attempt: attempt, Err: err}
		}
		rt, terr := c.retryer.GetRetryToken(ctx, err)
		if terr != nil {
			return nil, errors.Join(err, terr)
		}
		releaseRetry = rt
		delay, derr := c.retryer.RetryDelay(attempt, err)
		if derr != nil {
			return nil, derr
		}
		if serr := sleep(ctx, delay); serr != nil {
			return nil, &aws.RequestCanceledError{Err: serr}
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempt sends the request once and reads its answer.
func (c *Client) attempt(ctx context.Context, call *Call, body []byte, hash string, attempt, maxAttempts int) (any, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	h := req.Header
	h["Content-Type"] = []string{"application/x-amz-json-1.0"}
	h["X-Amz-Target"] = []string{"DynamoDB_20120810." + call.Operation}
	// DynamoDB's CRC32 is of the bytes it sends: no transparent gzip.
	h["Accept-Encoding"] = []string{"identity"}
	h["Amz-Sdk-Request"] = []string{"attempt=" + strconv.Itoa(attempt) + "; max=" + strconv.Itoa(maxAttempts)}
	h["User-Agent"] = []string{"batchwork-ddbwire"}
	traceHeader(h, c.inLambda)
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return nil, fmt.Errorf("ddbwire: retrieve credentials: %w", err)
		}
		if err := c.signer.SignHTTP(ctx, creds, req, hash, "dynamodb", c.region, time.Now().UTC()); err != nil {
			return nil, fmt.Errorf("ddbwire: sign: %w", err)
		}
	}
	resp, err := c.send(ctx, call, req, 0)
	if err != nil {
		if resp != nil && resp.Body != nil {
			resp.Body.Close()
		}
		// As smithy's HTTP client handler reports it: the retryer reads
		// a *smithyhttp.RequestSendError as a connection error.
		if ctx.Err() != nil {
			return nil, &smithy.CanceledError{Err: ctx.Err()}
		}
		return nil, &smithyhttp.RequestSendError{Err: err}
	}
	data, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil, &smithy.CanceledError{Err: ctx.Err()}
		}
		return nil, &smithyhttp.RequestSendError{Err: fmt.Errorf("read response: %w", err)}
	}
	if err := checkCRC(resp.Header, data); err != nil {
		derr := responseError(resp, &smithy.DeserializationError{Err: err, Snapshot: snapshot(data)})
		if errors.Is(err, errCRCMismatch) {
			// The service answered and the body was damaged on the
			// way: for the caller that is a lost answer, which the
			// retryer retries as a connection error and the store's
			// writes already meet (their read-backs).
			return nil, &smithyhttp.RequestSendError{Err: derr}
		}
		return nil, derr
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr, derr := decodeError(resp.Header.Get("X-Amzn-ErrorType"), data)
		if derr != nil {
			return nil, responseError(resp, derr)
		}
		return nil, responseError(resp, apiErr)
	}
	out, err := decode(call.Operation, data)
	if err != nil {
		return nil, responseError(resp, err)
	}
	return out, nil
}

// responseError wraps err as the SDK's response error wrapper does, with
// the HTTP status (which the retryer reads for 5xx) and the request ID.
func responseError(resp *http.Response, err error) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
		RequestID:     resp.Header.Get("X-Amzn-Requestid"),
	}
}

// errCRCMismatch: the body is not the one the service checksummed.
var errCRCMismatch = errors.New("ddbwire: response did not match expected checksum")

// checkCRC checks the body against the X-Amz-Crc32 header, when there is
// one. (The SDK's DynamoDB client computes it too but drops a mismatch
// when it closes the body.)
func checkCRC(h http.Header, body []byte) error {
	v := h.Get("X-Amz-Crc32")
	if v == "" {
		return nil
	}
	want, err := strconv.ParseUint(v, 10, 32)
	if err != nil {
		return fmt.Errorf("ddbwire: unable to parse checksum header %q: %w", v, err)
	}
	if got := crc32.ChecksumIEEE(body); uint32(want) != got {
		return fmt.Errorf("%w, %d, %d", errCRCMismatch, want, got)
	}
	return nil
}

func (c *Client) send(ctx context.Context, call *Call, req *http.Request, i int) (*http.Response, error) {
	if i < len(c.hooks) {
		return c.hooks[i].Attempt(ctx, call, req, func(r *http.Request) (*http.Response, error) { return c.send(ctx, call, r, i+1) })
	}
	return c.http.Do(req)
}

// retryerV2 is the SDK's wrapAsRetryerV2: a retryer without
// GetAttemptToken takes its initial token per attempt.
func retryerV2(r aws.Retryer) aws.RetryerV2 {
	if v2, ok := r.(aws.RetryerV2); ok {
		return v2
	}
	return initialTokenRetryer{r}
}

type initialTokenRetryer struct{ aws.Retryer }

func (r initialTokenRetryer) GetAttemptToken(context.Context) (func(error) error, error) {
	return r.GetInitialToken(), nil
}
