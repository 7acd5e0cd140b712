// Package emulator starts (or attaches to) an AWS API emulator for
// integration tests and local development.
//
// Selection, in order:
//
//   - AWS_ENDPOINT_URL set: that endpoint is used as-is (Kind "external").
//     It is health-checked; Stop is a no-op.
//   - BATCHWORK_EMULATOR=localstack: a localstack/localstack container is
//     started through testcontainers-go (needs a Docker engine).
//   - otherwise (BATCHWORK_EMULATOR unset or "moto"): moto_server from the
//     repository virtualenv (.venv, created by `make venv`) is started on
//     127.0.0.1 on a free port.
//
// The region is AWS_REGION, or us-east-1 when unset.
package emulator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Kinds of emulator.
const (
	KindMoto       = "moto"
	KindLocalstack = "localstack"
	KindExternal   = "external"
)

// Environment variables read by Start.
const (
	// EnvEndpointURL, when set, makes Start attach to that endpoint.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
	// EnvEmulator selects the emulator to start: "moto" (default) or "localstack".
	EnvEmulator = "BATCHWORK_EMULATOR"
	// EnvMotoServer overrides the path of the moto_server executable.
	EnvMotoServer = "BATCHWORK_MOTO_SERVER"
	// EnvLogDir is the directory for emulator log files (default os.TempDir()).
	EnvLogDir = "BATCHWORK_EMULATOR_LOGDIR"
	// EnvLocalstackAuthToken is passed through to the localstack container when set.
	EnvLocalstackAuthToken = "LOCALSTACK_AUTH_TOKEN"
	// EnvRegion is the AWS region used by the emulator clients.
	EnvRegion = "AWS_REGION"
)

// DefaultRegion is used when AWS_REGION is not set.
const DefaultRegion = "us-east-1"

// LocalstackImage is the image started for BATCHWORK_EMULATOR=localstack.
const LocalstackImage = "localstack/localstack:4.14.0"

// LocalstackServices is the SERVICES list given to the localstack container.
const LocalstackServices = "dynamodb,sqs,s3,cloudformation,iam,sts,lambda,events,ssm,logs"

const (
	motoStartTimeout     = 30 * time.Second
	externalCheckTimeout = 10 * time.Second
	stopGracePeriod      = 5 * time.Second
	healthPollInterval   = 50 * time.Millisecond
)

// Emulator is a running AWS API emulator.
type Emulator struct {
	// URL is the endpoint, e.g. "http://127.0.0.1:41234".
	URL string
	// Region is the AWS region clients should use.
	Region string
	// Kind is "moto", "localstack" or "external".
	Kind string
	// LogPath is the file receiving the moto server's stdout/stderr
	// (empty for other kinds).
	LogPath string

	// motoAPI is true when URL serves moto's /moto-api/ (a started moto, or
	// an external endpoint that turned out to be moto); enables Reset.
	motoAPI bool

	proc      *motoProcess // Kind "moto"
	container stopper      // Kind "localstack"
	stopOnce  sync.Once
	stopErr   error
}

type stopper interface {
	stop() error
}

// Options tunes StartWith. The zero value is what Start uses.
type Options struct {
	// Port pins the moto server port (0: pick a free port). Ignored for
	// other kinds. With a pinned port there is no retry on bind failure.
	Port int
	// LogDir overrides BATCHWORK_EMULATOR_LOGDIR / os.TempDir() for the
	// moto log file.
	LogDir string
	// UntrackTables works around a moto memory leak for long runs (the
	// bench): moto records every model object it creates, for its reset
	// API, and copies made for transactions were recorded too, so every
	// transaction leaked (measured before the launcher's rollback by item,
	// see motoLauncher: about 4 MB per commit with 2,000 tasks; the
	// 2,000-task bench passed 10 GB). With this set, the launcher also
	// stops recording DynamoDB tables, indexes and items. Requests and
	// their semantics do not change. The tests run without it.
	UntrackTables bool
}

// Start starts (or attaches to) an emulator; see the package documentation
// for how it is chosen. ctx bounds the startup only: cancelling it later does
// not stop the emulator, call Stop for that.
func Start(ctx context.Context) (*Emulator, error) {
	return StartWith(ctx, Options{})
}

// StartWith is Start with options.
func StartWith(ctx context.Context, opts Options) (*Emulator, error) {
	region := os.Getenv(EnvRegion)
	if region == "" {
		region = DefaultRegion
	}
	if u := os.Getenv(EnvEndpointURL); u != "" {
		return attachExternal(ctx, u, region)
	}
	switch kind := strings.ToLower(strings.TrimSpace(os.Getenv(EnvEmulator))); kind {
	case "", KindMoto:
		return startMoto(ctx, region, opts)
	case KindLocalstack:
		return startLocalstack(ctx, region)
	default:
		return nil, fmt.Errorf("emulator: unknown %s=%q (want %q or %q, or set %s)",
			EnvEmulator, kind, KindMoto, KindLocalstack, EnvEndpointURL)
	}
}

func newEmulator(url, region, kind string) *Emulator {
	return &Emulator{URL: url, Region: region, Kind: kind}
}

// Stop terminates the emulator and waits for it: the moto process group gets
// SIGTERM, then SIGKILL after a grace period; the localstack container is
// terminated. It is a no-op for an external endpoint. Stop is idempotent.
// It reports an error if a moto server had died before Stop was called.
func (e *Emulator) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		switch {
		case e.proc != nil:
			e.stopErr = e.proc.stop(stopGracePeriod)
		case e.container != nil:
			e.stopErr = e.container.stop()
		}
	})
	return e.stopErr
}

// AWSConfig returns an aws.Config pointed at the emulator: BaseEndpoint is
// URL, the credentials are static ("test", "test") and the region is Region.
// Callers set S3 UsePathStyle themselves.
func (e *Emulator) AWSConfig() aws.Config {
	return aws.Config{
		Region:       e.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(e.URL),
	}
}

// ErrResetNotSupported is returned by Reset for emulators other than moto.
var ErrResetNotSupported = errors.New("reset not supported")

// Reset wipes all emulator state (moto: POST /moto-api/reset). For an
// external endpoint it works when the endpoint is a moto server; otherwise it
// returns an error wrapping ErrResetNotSupported.
func (e *Emulator) Reset(ctx context.Context) error {
	if !e.motoAPI {
		return fmt.Errorf("emulator %s at %s: %w", e.Kind, e.URL, ErrResetNotSupported)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint("/moto-api/reset"), nil)
	if err != nil {
		return err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return fmt.Errorf("emulator reset: %w%s", err, e.logHint())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("emulator reset: %s: %s%s", resp.Status, strings.TrimSpace(string(body)), e.logHint())
	}
	return nil
}

func (e *Emulator) endpoint(path string) string {
	return strings.TrimRight(e.URL, "/") + path
}

func (e *Emulator) logHint() string {
	if e.LogPath == "" {
		return ""
	}
	return " (log: " + e.LogPath + ")"
}

// httpClient is used for health checks and the moto API. No keep-alives so
// that a stopped server does not leave idle connections behind.
var httpClient = &http.Client{
	Timeout:   10 * time.Second,
	Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
}

// probe does one GET and returns the status code.
func probe(ctx context.Context, url string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// attachExternal uses an already running endpoint. It is healthy once it
// answers HTTP at all (any status); moto and localstack are recognised by
// their own health endpoints.
func attachExternal(ctx context.Context, url, region string) (*Emulator, error) {
	e := newEmulator(url, region, KindExternal)
	ctx, cancel := context.WithTimeout(ctx, externalCheckTimeout)
	defer cancel()
	var lastErr error
	for {
		code, err := probe(ctx, e.endpoint("/moto-api/"), 2*time.Second)
		if err == nil {
			if code == http.StatusOK {
				e.motoAPI = true
			}
			return e, nil
		}
		lastErr = err
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("emulator: %s=%s is not reachable: %w (unset %s to start a local moto server)",
				EnvEndpointURL, url, lastErr, EnvEndpointURL)
		case <-time.After(healthPollInterval * 4):
		}
	}
}
