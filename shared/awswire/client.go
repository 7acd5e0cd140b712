// Package awswire is the service-independent core of the lean AWS clients
// (shared/ddbwire for DynamoDB, shared/sqswire for SQS): an operation's
// AWS JSON 1.0 body POSTed through the config's HTTP client to the
// endpoint the SDK's rules resolve, signed with SigV4 (signer.go)
// and cached credentials, retried by the config's retryer in a copy of
// the SDK's retry loop, and handed to the hooks installed on the config
// (hook.go) call by call and attempt by attempt, as the SDK's middleware
// saw them. What differs between services (the body's codec, the typed
// errors, a check of the answer) is the Service a client is built with.
package awswire

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyendpoints "github.com/aws/smithy-go/endpoints"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Service is what a lean client of one service adds to the core.
type Service struct {
	// ID is the SDK's service ID ("DynamoDB", "SQS"): Call.Service and
	// the ServiceID of the *smithy.OperationError a call fails with.
	ID string
	// Package prefixes the errors the core makes ("ddbwire").
	Package string
	// EnvClient names the variable that puts the SDK's client back,
	// named when a config is refused.
	EnvClient string
	// SigningName is SigV4's service name ("dynamodb").
	SigningName string
	// Target prefixes the operation in X-Amz-Target ("DynamoDB_20120810.").
	Target string
	// Header is sent on every request besides the protocol's own.
	Header map[string]string
	// Encode writes a call's input, once for all its attempts.
	Encode func(*Call) ([]byte, error)
	// Decode reads a 2xx answer into the operation's output.
	Decode func(op string, body []byte) (any, error)
	// DecodeError reads a non-2xx answer into the SDK's error for it; the
	// second error is an answer it could not read.
	DecodeError func(op string, h http.Header, body []byte) (apiErr, decodeErr error)
	// Check, when set, reads every answer before anything else (DynamoDB's
	// CRC32): an error it returns fails the attempt, retried as a lost
	// answer when it is Damaged.
	Check func(h http.Header, body []byte) error
}

// Options is the part of an SDK client's options the core honours, as the
// service's NewFromConfig built them.
type Options struct {
	Region          string
	HTTPClient      aws.HTTPClient
	Credentials     aws.CredentialsProvider
	Retryer         aws.Retryer
	FIPS            bool
	DualStack       bool
	HasResolver     bool // the config carries a custom (v1) endpoint resolver
	ResolveEndpoint func(context.Context) (smithyendpoints.Endpoint, error)
}

// Client sends the operations of one service. Safe for concurrent use.
type Client struct {
	svc    Service
	http   aws.HTTPClient
	creds  aws.CredentialsProvider // nil: requests go unsigned
	signer *v4.Signer
	// own signs instead of signer unless BATCHWORK_SIGNER=sdk (signer.go).
	own      *sigv4
	endpoint string
	// tmpl is http.NewRequest's POST to endpoint without a body: each
	// attempt's request starts as a copy.
	tmpl    *http.Request
	region  string
	retryer aws.RetryerV2
	hooks   []Hook
	header  http.Header // constant headers, copied into each request
	// inLambda: AWS_LAMBDA_FUNCTION_NAME is set (trace.go).
	inLambda bool
	// targets holds each operation's X-Amz-Target value ([]string).
	targets sync.Map
	// attemptsHeader[i] is the Amz-Sdk-Request value of attempt i+1 of
	// attemptsMax, the retryer's limit at New.
	attemptsHeader [][]string
	attemptsMax    int
}

// New builds the core of a lean client with the endpoint, credentials
// (cached), HTTP client and retryer the SDK's client of o would use, and
// cfg's hooks (Install). A config the core would send elsewhere than the
// SDK's client is refused.
func New(cfg aws.Config, svc Service, o Options) (*Client, error) {
	if o.Region == "" {
		return nil, fmt.Errorf("%s: the config has no region", svc.Package)
	}
	if o.HasResolver {
		return nil, fmt.Errorf("%s: a custom endpoint resolver is not supported (set BaseEndpoint, or %s=sdk)", svc.Package, svc.EnvClient)
	}
	if o.FIPS || o.DualStack {
		return nil, fmt.Errorf("%s: FIPS and dual-stack endpoints are not supported (%s=sdk uses the SDK's client)", svc.Package, svc.EnvClient)
	}
	// The SDK's endpoint rules, once: the partition's domain
	// (amazonaws.com.cn, c2s.ic.gov, ...), and a base endpoint's path
	// kept as the SDK sends it (smithyhttp.JoinPath(path, "/")).
	ep, err := o.ResolveEndpoint(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s: endpoint: %w", svc.Package, err)
	}
	u := ep.URI
	u.Path, u.RawPath = smithyhttp.JoinPath(u.Path, "/"), ""
	endpoint := u.String()
	tmpl, err := http.NewRequest(http.MethodPost, endpoint, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: endpoint %q: %w", svc.Package, endpoint, err)
	}
	h := http.Header{
		"Content-Type": {"application/x-amz-json-1.0"},
		"User-Agent":   {"batchwork-" + svc.Package},
	}
	for k, v := range svc.Header {
		h.Set(k, v)
	}
	c := &Client{
		svc:      svc,
		http:     o.HTTPClient,
		signer:   v4.NewSigner(),
		endpoint: endpoint,
		region:   o.Region,
		retryer:  retryerV2(o.Retryer),
		hooks:    Hooks(cfg),
		tmpl:     tmpl,
		header:   h,
		inLambda: lookup("AWS_LAMBDA_FUNCTION_NAME"),
	}
	if m := c.retryer.MaxAttempts(); m > 0 && m <= 16 {
		c.attemptsMax = m
		for i := 1; i <= m; i++ {
			c.attemptsHeader = append(c.attemptsHeader, []string{sdkRequestValue(i, m)})
		}
	}
	sdkSigner, err := sdkSignerChosen()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", svc.Package, err)
	}
	if !sdkSigner {
		c.own = newSigV4(endpoint, h, svc.SigningName, o.Region)
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

// Do runs one operation through the hooks and returns its output. check,
// when set, reads the output after the hooks and the retries, as an SDK
// Initialize middleware added Before does (SQS's MD5 checks). An error
// comes back as the SDK's does, in a *smithy.OperationError.
func (c *Client) Do(ctx context.Context, op string, in any, check func(in, out any) error) (any, error) {
	call := &Call{Service: c.svc.ID, Operation: op, Input: in}
	err := c.run(ctx, call, 0)
	if err == nil && check != nil {
		err = check(in, call.Output)
	}
	if err != nil {
		return nil, &smithy.OperationError{ServiceID: c.svc.ID, OperationName: op, Err: err}
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

// invoke sends the call with the retry loop of the SDK's retry middleware
// (aws/retry.Attempt): an attempt token per attempt, the retryer's
// classification, its attempt limit (then *retry.MaxAttemptsError), a
// retry token and its delay before each retry.
func (c *Client) invoke(ctx context.Context, call *Call) (any, error) {
	body, err := c.svc.Encode(call)
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
	req, err := c.request(ctx, call.Operation, body, attempt, maxAttempts)
	if err != nil {
		return nil, err
	}
	if c.creds != nil {
		creds, err := c.creds.Retrieve(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s: retrieve credentials: %w", c.svc.Package, err)
		}
		if err := c.sign(ctx, req, creds, hash, time.Now()); err != nil {
			return nil, err
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
	data, err := readBody(resp.Body, resp.ContentLength)
	resp.Body.Close()
	if err != nil {
		if ctx.Err() != nil {
			return nil, &smithy.CanceledError{Err: ctx.Err()}
		}
		return nil, &smithyhttp.RequestSendError{Err: fmt.Errorf("read response: %w", err)}
	}
	if c.svc.Check != nil {
		if err := c.svc.Check(resp.Header, data); err != nil {
			derr := responseError(resp, &smithy.DeserializationError{Err: err, Snapshot: Snapshot(data)})
			var d damaged
			if errors.As(err, &d) {
				// The service answered and the body was damaged on the
				// way: for the caller that is a lost answer, which the
				// retryer retries as a connection error.
				return nil, &smithyhttp.RequestSendError{Err: derr}
			}
			return nil, derr
		}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		apiErr, derr := c.svc.DecodeError(call.Operation, resp.Header, data)
		if derr != nil {
			return nil, responseError(resp, derr)
		}
		return nil, responseError(resp, apiErr)
	}
	out, err := c.svc.Decode(call.Operation, data)
	if err != nil {
		return nil, responseError(resp, err)
	}
	return out, nil
}

// maxSizedBody bounds the buffer readBody allocates from an answer's
// Content-Length before reading it: a larger answer (none of the JSON
// protocols' is) grows as it arrives, as io.ReadAll grows it.
const maxSizedBody = 1 << 20

// readBody reads r to its end: into one buffer of the declared length
// when there is one, instead of io.ReadAll's growing (several copies and
// allocations for a body of a few KB).
func readBody(r io.Reader, length int64) ([]byte, error) {
	if length < 0 || length > maxSizedBody {
		return io.ReadAll(r)
	}
	// One byte more than declared: the read that meets the end (and gives
	// the connection back) then has room, and a body longer than
	// declared is still read whole, as io.ReadAll reads it.
	b := make([]byte, 0, length+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

// request is an attempt's request, unsigned: what
// http.NewRequestWithContext(ctx, POST, endpoint, bytes.NewReader(body))
// makes (TestRequestIsNewRequest), without parsing the endpoint again.
func (c *Client) request(ctx context.Context, op string, body []byte, attempt, maxAttempts int) (*http.Request, error) {
	// A copy of the endpoint's request, parsed once in New: its URL is
	// copied too (the signer writes it).
	if ctx == nil {
		return nil, errors.New("net/http: nil Context")
	}
	req := c.tmpl.WithContext(ctx)
	u := *c.tmpl.URL
	req.URL = &u
	req.ContentLength = int64(len(body))
	if len(body) > 0 {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	} else {
		req.Body = http.NoBody
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
	}
	// Sized for what the request gets: the constant headers, the two
	// below, the signer's three (X-Amz-Date, X-Amz-Security-Token,
	// Authorization) and the trace header on Lambda. Up to 8 the map is
	// one group (one allocation); a larger hint makes a table.
	n := len(c.header) + 5
	if c.inLambda {
		n++
	}
	h := make(http.Header, n)
	req.Header = h
	// The value slices set here are shared by every request: the signer
	// and the hooks replace a header's slice (Set), never write into it.
	for k, v := range c.header {
		h[k] = v
	}
	h["X-Amz-Target"] = c.target(op)
	h["Amz-Sdk-Request"] = c.sdkRequest(attempt, maxAttempts)
	traceHeader(h, c.inLambda)
	return req, nil
}

// target is op's X-Amz-Target value, made once per operation.
func (c *Client) target(op string) []string {
	if v, ok := c.targets.Load(op); ok {
		return v.([]string)
	}
	v, _ := c.targets.LoadOrStore(op, []string{c.svc.Target + op})
	return v.([]string)
}

// sdkRequest is the Amz-Sdk-Request value of an attempt, made once for
// the attempts of the retryer's limit at New.
func (c *Client) sdkRequest(attempt, maxAttempts int) []string {
	if maxAttempts == c.attemptsMax && attempt >= 1 && attempt <= len(c.attemptsHeader) {
		return c.attemptsHeader[attempt-1]
	}
	return []string{sdkRequestValue(attempt, maxAttempts)}
}

func sdkRequestValue(attempt, maxAttempts int) string {
	return "attempt=" + strconv.Itoa(attempt) + "; max=" + strconv.Itoa(maxAttempts)
}

// sign signs req with the core's own signer or, when it has none, the SDK's.
func (c *Client) sign(ctx context.Context, req *http.Request, creds aws.Credentials, hash string, t time.Time) error {
	if c.own != nil {
		c.own.sign(req, creds, hash, t)
		return nil
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hash, c.svc.SigningName, c.region, t.UTC()); err != nil {
		return fmt.Errorf("%s: sign: %w", c.svc.Package, err)
	}
	return nil
}

// damaged marks a Check's error as a body damaged on the way.
type damaged struct{ error }

func (d damaged) Unwrap() error { return d.error }

// Damaged marks err, returned by a Service's Check, as an answer damaged
// on the way (its checksum does not match): retried as a lost answer.
func Damaged(err error) error { return damaged{err} }

// Snapshot is the start of a body, for a *smithy.DeserializationError.
func Snapshot(b []byte) []byte {
	if len(b) > 1024 {
		b = b[:1024]
	}
	return append([]byte(nil), b...)
}

// responseError wraps err as the SDK's response error wrapper does, with
// the HTTP status (which the retryer reads for 5xx) and the request ID.
func responseError(resp *http.Response, err error) error {
	return &awshttp.ResponseError{
		ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: resp}, Err: err},
		RequestID:     resp.Header.Get("X-Amzn-Requestid"),
	}
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
