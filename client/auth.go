package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/batchwork/batchwork/shared/localauth"
)

// Signer authenticates a request to the API just before it is sent: with
// SigV4 for a deployed stack (SigV4), or with the owner header and token
// for the local runner (LocalOwner). body is the request's body, which a
// signature covers.
type Signer interface {
	Sign(ctx context.Context, req *http.Request, body []byte) error
}

// LocalOwner marks a request for the local runner: the owner header, and
// the run's token when there is one (LocalToken finds it).
type LocalOwner struct{ Owner, Token string }

// Sign sets the owner header and the token.
func (o LocalOwner) Sign(_ context.Context, req *http.Request, _ []byte) error {
	req.Header.Set(OwnerHeader, o.Owner)
	if o.Token != "" {
		localauth.SetHeader(req, o.Token)
	}
	return nil
}

// LocalToken finds the local runner's token: BATCHWORK_LOCAL_TOKEN, else
// the file BATCHWORK_LOCAL_TOKEN_FILE names, else the file the runner on
// the endpoint's port wrote in the user's configuration directory; that
// last one only for an endpoint on this machine, so a token is never sent
// elsewhere unless the user said so. With no token found it returns "" and
// a hint for the refusal that follows (Client.AuthHint): servers that need
// no token (test fixtures) still work. A file that is there but unusable
// is an *AuthError.
func LocalToken(getenv func(string) string, endpoint *url.URL) (token, hint string, err error) {
	if tok := getenv(localauth.TokenEnv); tok != "" {
		return tok, "", nil
	}
	if path := getenv(localauth.TokenFileEnv); path != "" {
		tok, err := localauth.ReadFile(path)
		if err != nil {
			return "", "", &AuthError{fmt.Errorf("%s: %w", localauth.TokenFileEnv, err)}
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
		return "", "", &AuthError{err}
	}
	return tok, "", nil
}

// SigV4 signs with AWS credentials for API Gateway's IAM authorization
// (service execute-api).
type SigV4 struct {
	Credentials aws.CredentialsProvider
	Region      string
	// Now is the signing time; nil is time.Now.
	Now func() time.Time
}

// Sign signs req and its body.
func (s *SigV4) Sign(ctx context.Context, req *http.Request, body []byte) error {
	creds, err := s.Credentials.Retrieve(ctx)
	if err != nil {
		return &AuthError{fmt.Errorf("no AWS credentials for signing: %w", err)}
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", hash)
	now := s.Now
	if now == nil {
		now = time.Now
	}
	return v4.NewSigner().SignHTTP(ctx, creds, req, hash, "execute-api", s.Region, now())
}

// ErrNoRegion is NewSigV4's error when no region to sign for is given,
// configured or named by the endpoint.
var ErrNoRegion = errors.New("no AWS region to sign for")

// NewSigV4 loads the default credential chain (environment, shared files,
// SSO, instance roles), of profile when set. The region is region, else
// the one in an execute-api host name, else the configured one. A
// configuration that cannot be loaded is an *AuthError.
func NewSigV4(ctx context.Context, endpoint *url.URL, region, profile string, now func() time.Time) (*SigV4, error) {
	var opts []func(*config.LoadOptions) error
	if profile != "" {
		opts = append(opts, config.WithSharedConfigProfile(profile))
	}
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, &AuthError{fmt.Errorf("load AWS configuration: %w", err)}
	}
	if region == "" {
		region = RegionOfHost(endpoint.Hostname())
	}
	if region == "" {
		region = cfg.Region
	}
	if region == "" {
		return nil, ErrNoRegion
	}
	return &SigV4{Credentials: cfg.Credentials, Region: region, Now: now}, nil
}
