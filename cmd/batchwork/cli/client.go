package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/spec"
)

// OwnerHeader is the identity header the local runner trusts on loopback.
const OwnerHeader = "X-Batchwork-Owner"

// APIError is an error answer of the API.
type APIError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
	// Errors lists every problem of an invalid spec.
	Errors []spec.FieldError `json:"errors"`
}

func (e *APIError) Error() string {
	// A bad parameter's message reads after its name ("limit: must be...").
	if e.Code == "invalid_request" && e.Field != "" && !strings.HasPrefix(e.Message, e.Field) {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// signer signs a request for the API (SigV4), or marks it with the local
// owner.
type signer interface {
	sign(ctx context.Context, req *http.Request, body []byte) error
}

// localOwner marks a request for the local runner: the owner header, and
// the run's token when the CLI found one (localToken).
type localOwner struct{ owner, token string }

func (o localOwner) sign(_ context.Context, req *http.Request, _ []byte) error {
	req.Header.Set(OwnerHeader, o.owner)
	if o.token != "" {
		localauth.SetHeader(req, o.token)
	}
	return nil
}

// localToken finds the local runner's token: BATCHWORK_LOCAL_TOKEN, else
// the file BATCHWORK_LOCAL_TOKEN_FILE names, else the file the runner on
// the endpoint's port wrote in the user's configuration directory; that
// last one only for an endpoint on this machine, so a token is never sent
// elsewhere unless the user said so. With no token found it returns "" and
// a hint for the refusal that follows: servers that need no token (test
// fixtures) still work. A file that is there but unusable is an error.
func localToken(getenv func(string) string, endpoint *url.URL) (token, hint string, err error) {
	if tok := getenv(localauth.TokenEnv); tok != "" {
		return tok, "", nil
	}
	if path := getenv(localauth.TokenFileEnv); path != "" {
		tok, err := localauth.ReadFile(path)
		if err != nil {
			return "", "", &authError{fmt.Errorf("%s: %w", localauth.TokenFileEnv, err)}
		}
		return tok, "", nil
	}
	// A loopback address, not a name: localhost may resolve to ::1, where
	// another local user can listen on the runner's port and collect the
	// token.
	if ip := net.ParseIP(endpoint.Hostname()); ip == nil || !ip.IsLoopback() {
		return "", fmt.Sprintf("set %s (or %s) to the token of the runner at %s, or address it as 127.0.0.1", localauth.TokenEnv, localauth.TokenFileEnv, endpoint.Host), nil
	}
	port := endpoint.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[endpoint.Scheme]
	}
	path, err := localauth.DefaultFile(getenv, port)
	if err != nil {
		return "", fmt.Sprintf("no token file to read: %v; or set %s", err, localauth.TokenEnv), nil
	}
	tok, err := localauth.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Sprintf("no token at %s: is batchwork-local (or make demo SERVE=1) running on port %s as this user? "+
			"If it wrote its token elsewhere, set %s or %s", path, port, localauth.TokenFileEnv, localauth.TokenEnv), nil
	}
	if err != nil {
		return "", "", &authError{err}
	}
	return tok, "", nil
}

// sigv4 signs with the AWS credential chain for API Gateway's IAM
// authorization (service execute-api).
type sigv4 struct {
	creds  aws.CredentialsProvider
	region string
	now    func() time.Time
}

func (s *sigv4) sign(ctx context.Context, req *http.Request, body []byte) error {
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return &authError{fmt.Errorf("no AWS credentials for signing: %w", err)}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	return v4.NewSigner().SignHTTP(ctx, creds, req, hash, "execute-api", s.region, s.now())
}

type authError struct{ err error }

func (e *authError) Error() string { return e.err.Error() }
func (e *authError) Unwrap() error { return e.err }

// newSigV4 loads the default credential chain (environment, shared files,
// SSO, instance roles). The region is --region, else the configured one,
// else the one in an execute-api host name.
func newSigV4(ctx context.Context, endpoint *url.URL, region, profile string, now func() time.Time) (*sigv4, error) {
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &authError{fmt.Errorf("load AWS configuration: %w", err)}
	}
	if region == "" {
		region = regionOfHost(endpoint.Hostname())
	}
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return nil, &usageError{"no AWS region to sign for: set --region or AWS_REGION"}
	}
	return &sigv4{creds: cfg.Credentials, region: region, now: now}, nil
}

// regionOfHost reads the region of "<api>.execute-api.<region>.amazonaws.com".
func regionOfHost(host string) string {
	parts := strings.Split(host, ".")
	for i := 0; i+2 < len(parts); i++ {
		if parts[i] == "execute-api" {
			return parts[i+1]
		}
	}
	return ""
}

// isLoopback reports whether the endpoint is on this machine: there the
// local runner is, and it takes the owner header instead of signatures.
func isLoopback(u *url.URL) bool {
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// client calls the API.
type client struct {
	base   *url.URL
	http   *http.Client
	signer signer
	// authHint, when set, is added to a 401: how to give the token the
	// CLI did not find.
	authHint string
	retries  int
	sleep    func(context.Context, time.Duration) error
}

// call sends one request and decodes a 2xx JSON answer into out. Requests
// the API treats idempotently (every GET, a submission with its
// Idempotency-Key, a cancel) are retried on network errors, throttling and
// 5xx gateway errors, with backoff.
func (c *client) call(ctx context.Context, method, path string, query url.Values, body []byte, header http.Header, out any) error {
	u := *c.base
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawQuery = query.Encode()
	var lastErr error
	for attempt := 0; attempt <= c.retries; attempt++ {
		if attempt > 0 {
			if err := c.sleep(ctx, time.Duration(200<<(attempt-1))*time.Millisecond); err != nil {
				return err
			}
		}
		req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
		if err != nil {
			return err
		}
		for k, vs := range header {
			req.Header[k] = vs
		}
		if body != nil && req.Header.Get("Content-Type") == "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("User-Agent", "batchwork-cli")
		if err := c.signer.sign(ctx, req, body); err != nil {
			return err
		}
		resp, err := c.http.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			lastErr = &netError{err: err, endpoint: c.base.String()}
			continue
		}
		raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			lastErr = &netError{err: err, endpoint: c.base.String()}
			continue
		}
		switch {
		case resp.StatusCode >= 200 && resp.StatusCode < 300:
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("decode the answer of %s %s: %w", method, path, err)
			}
			return nil
		case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusBadGateway ||
			resp.StatusCode == http.StatusServiceUnavailable || resp.StatusCode == http.StatusGatewayTimeout:
			lastErr = decodeAPIError(resp.StatusCode, raw)
			continue
		}
		e := decodeAPIError(resp.StatusCode, raw)
		if e.Status == http.StatusUnauthorized && c.authHint != "" {
			e.Message += " (" + c.authHint + ")"
		}
		return e
	}
	return lastErr
}

func decodeAPIError(status int, raw []byte) *APIError {
	e := &APIError{Status: status}
	if err := json.Unmarshal(raw, e); err != nil || e.Message == "" {
		// Not the API's error (a gateway's, a proxy's): say what came back.
		msg := strings.TrimSpace(string(raw))
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		e.Code, e.Message = "http_"+fmt.Sprint(status), fmt.Sprintf("%s: %s", http.StatusText(status), msg)
	}
	return e
}

type netError struct {
	err      error
	endpoint string
}

func (e *netError) Error() string {
	return fmt.Sprintf("cannot reach the API at %s: %v (is the runner up? see --endpoint)", e.endpoint, e.err)
}
func (e *netError) Unwrap() error { return e.err }

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
