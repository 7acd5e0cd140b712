// Package emulator starts (or attaches to) AWS API emulators for
// tests, local development and `batchwork dev`.
//
// SQS, S3, CloudFormation and the rest, in order:
//
//   - AWS_ENDPOINT_URL set: that endpoint is used as-is (Kind "external").
//     It is health-checked; Stop is a no-op.
//   - BATCHWORK_EMULATOR=localstack: a localstack/localstack container is
//     started by Options.Localstack (internal/emulator/localstack, through
//     testcontainers-go; needs a Docker engine). Programs that do not set
//     it, the batchwork CLI among them, refuse the setting: the launcher
//     itself does not link testcontainers-go.
//   - otherwise (BATCHWORK_EMULATOR unset or "moto"): moto_server from the
//     repository virtualenv (.venv, created by `make venv`) is started on
//     127.0.0.1 on a free port.
//
// DynamoDB (Dynamo, DynamoURL), in order:
//
//   - AWS_ENDPOINT_URL_DYNAMODB set: that endpoint ("external"),
//     health-checked; as in the AWS SDKs, it wins over AWS_ENDPOINT_URL.
//   - AWS_ENDPOINT_URL set, or LocalStack: the same endpoint as the rest.
//   - moto with BATCHWORK_DYNAMODB=moto: moto's own DynamoDB, through the
//     launcher in moto.go.
//   - otherwise (moto, BATCHWORK_DYNAMODB unset or "local"): DynamoDB
//     Local ("dynamodb-local"), AWS's own emulator, installed by `make
//     dynamodb-local` into .dynamodb-local and started beside moto on
//     another free port. It is the default because it behaves like
//     DynamoDB where moto does not: it honours ClientRequestToken and
//     applies requests atomically without a launcher's lock.
//
// AWSConfig sends DynamoDB to DynamoURL and everything else to URL. If an
// emulator cannot be started, Start fails; callers never skip. In a test
// binary run with -short (the unit tier) Start refuses to start anything:
// see ErrShort.
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
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/batchwork/batchwork/shared/awsconf"
)

// Kinds of emulator.
const (
	KindMoto       = "moto"
	KindLocalstack = "localstack"
	KindExternal   = "external"
	// KindDynamoDBLocal is DynamoDB Local, in Emulator.Dynamo.
	KindDynamoDBLocal = "dynamodb-local"
)

// Values of BATCHWORK_DYNAMODB and Options.DynamoDB.
const (
	DynamoDBLocal = "local" // DynamoDB Local beside moto (the default)
	DynamoDBMoto  = "moto"  // moto's own DynamoDB
)

// Environment variables read by Start.
const (
	// EnvEndpointURL, when set, makes Start attach to that endpoint.
	EnvEndpointURL = "AWS_ENDPOINT_URL"
	// EnvEndpointURLDynamoDB, when set, is the DynamoDB endpoint.
	EnvEndpointURLDynamoDB = "AWS_ENDPOINT_URL_DYNAMODB"
	// EnvDynamoDB selects moto's DynamoDB: "local" (default) or "moto".
	EnvDynamoDB = "BATCHWORK_DYNAMODB"
	// EnvDynamoDBLocalDir overrides the directory of DynamoDB Local's jars
	// (default .dynamodb-local/lib in the repository root).
	EnvDynamoDBLocalDir = "BATCHWORK_DYNAMODB_LOCAL"
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
	// DynamoURL is the DynamoDB endpoint: DynamoDB Local's, or URL when
	// the emulator serves DynamoDB itself.
	DynamoURL string
	// Dynamo is what serves DynamoDB: "dynamodb-local", "moto",
	// "localstack" or "external".
	Dynamo string
	// DynamoLogPath is DynamoDB Local's log file (empty otherwise).
	DynamoLogPath string

	// motoAPI is true when URL serves moto's /moto-api/ (a started moto, or
	// an external endpoint that turned out to be moto); enables Reset.
	motoAPI bool

	proc          *process     // Kind "moto"
	dynamo        *process     // Dynamo "dynamodb-local"
	stopContainer func() error // Kind "localstack"
	stopOnce      sync.Once
	stopErr       error
}

// StartContainer starts LocalStack (LocalstackImage, serving
// LocalstackServices in region) and returns its endpoint and how to stop
// it; internal/emulator/localstack.Start is one.
type StartContainer func(ctx context.Context, region string) (url string, stop func() error, err error)

// Options tunes StartWith. The zero value is what Start uses.
type Options struct {
	// Port pins the moto server port (0: pick a free port). Ignored for
	// other kinds. With a pinned port there is no retry on bind failure.
	Port int
	// LogDir overrides BATCHWORK_EMULATOR_LOGDIR / os.TempDir() for the
	// moto log file.
	LogDir string
	// DynamoDB overrides BATCHWORK_DYNAMODB: "local" or "moto". It
	// matters only when moto is started and AWS_ENDPOINT_URL_DYNAMODB is
	// not set.
	DynamoDB string
	// UntrackTables works around a moto memory leak for long runs (the
	// bench), when moto serves DynamoDB: moto records every model object it creates, for its reset
	// API, and copies made for transactions were recorded too, so every
	// transaction leaked (measured before the launcher's rollback by item,
	// see motoLauncher: about 4 MB per commit with 2,000 tasks; the
	// 2,000-task bench passed 10 GB). With this set, the launcher also
	// stops recording DynamoDB tables, indexes and items. Requests and
	// their semantics do not change. The tests run without it. Ignored
	// when DynamoDB Local serves DynamoDB.
	UntrackTables bool
	// DynamoPeak runs DynamoDB Local's JVM with its own defaults (tiered
	// JIT, G1), for the bench, which measures the emulator's peak rate.
	// Otherwise it runs leaner (see leanJVM): less CPU a request, a little
	// more time.
	DynamoPeak bool
	// Localstack starts the container BATCHWORK_EMULATOR=localstack asks
	// for; nil: that setting is refused (this program cannot start it).
	Localstack StartContainer
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
	dynamo := opts.DynamoDB
	if dynamo == "" {
		dynamo = strings.ToLower(strings.TrimSpace(os.Getenv(EnvDynamoDB)))
	}
	if dynamo != "" && dynamo != DynamoDBLocal && dynamo != DynamoDBMoto {
		return nil, fmt.Errorf("emulator: unknown %s=%q (want %q or %q)", EnvDynamoDB, dynamo, DynamoDBLocal, DynamoDBMoto)
	}
	externalDynamo := os.Getenv(EnvEndpointURLDynamoDB) != ""
	var e *Emulator
	var err error
	kind := strings.ToLower(strings.TrimSpace(os.Getenv(EnvEmulator)))
	if os.Getenv(EnvEndpointURL) == "" && (kind == "" || kind == KindMoto || kind == KindLocalstack) && underShort() {
		return nil, ErrShort
	}
	switch {
	case os.Getenv(EnvEndpointURL) != "":
		e, err = attachExternal(ctx, os.Getenv(EnvEndpointURL), region)
	case (kind == "" || kind == KindMoto) && dynamo != DynamoDBMoto && !externalDynamo:
		e, err = startMotoWithDynamoLocal(ctx, region, opts)
	case kind == "" || kind == KindMoto:
		opts.UntrackTables = opts.UntrackTables && !externalDynamo
		e, err = startMoto(ctx, region, opts)
	case kind == KindLocalstack:
		e, err = startLocalstack(ctx, region, opts.Localstack)
	default:
		return nil, fmt.Errorf("emulator: unknown %s=%q (want %q or %q, or set %s)",
			EnvEmulator, kind, KindMoto, KindLocalstack, EnvEndpointURL)
	}
	if err != nil {
		return nil, err
	}
	if err := e.attachDynamo(ctx); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

func newEmulator(url, region, kind string) *Emulator {
	return &Emulator{URL: url, Region: region, Kind: kind, DynamoURL: url, Dynamo: kind}
}

// startMotoWithDynamoLocal starts moto and DynamoDB Local at once (each
// takes a second or two).
func startMotoWithDynamoLocal(ctx context.Context, region string, opts Options) (*Emulator, error) {
	logDir, err := logDirOf(opts)
	if err != nil {
		return nil, err
	}
	type started struct {
		p   *process
		url string
		err error
	}
	dyn := make(chan started, 1)
	go func() {
		p, url, err := startDynamoLocal(ctx, logDir, opts.DynamoPeak)
		dyn <- started{p, url, err}
	}()
	opts.UntrackTables = false // moto's DynamoDB is not used
	e, err := startMoto(ctx, region, opts)
	d := <-dyn
	if err != nil || d.err != nil {
		if e != nil {
			_ = e.Stop()
		}
		if d.p != nil {
			_ = d.p.stop(stopGracePeriod)
		}
		return nil, errors.Join(err, d.err)
	}
	e.dynamo, e.DynamoURL, e.Dynamo, e.DynamoLogPath = d.p, d.url, KindDynamoDBLocal, d.p.logPath
	return e, nil
}

// attachDynamo points DynamoDB at AWS_ENDPOINT_URL_DYNAMODB when it is
// set, once it answers.
func (e *Emulator) attachDynamo(ctx context.Context) error {
	u := os.Getenv(EnvEndpointURLDynamoDB)
	if u == "" {
		// The SDK tells an empty AWS_ENDPOINT_URL from an unset one: set,
		// it skips the config sources that route DynamoDB (see AWSConfig),
		// and DynamoDB Local would silently go unused.
		if v, set := os.LookupEnv(EnvEndpointURL); set && v == "" && e.DynamoURL != e.URL {
			return fmt.Errorf("emulator: %s is set but empty, which makes the AWS SDK send DynamoDB to %s instead of %s; unset it",
				EnvEndpointURL, e.URL, e.DynamoURL)
		}
		return nil
	}
	if _, err := waitReachable(ctx, strings.TrimRight(u, "/")+"/"); err != nil {
		return fmt.Errorf("emulator: %s=%s is not reachable: %w (unset it to use the emulator's DynamoDB)", EnvEndpointURLDynamoDB, u, err)
	}
	e.DynamoURL, e.Dynamo = u, KindExternal
	return nil
}

// Stop terminates the emulator and waits for it: the moto and DynamoDB
// Local process groups get SIGTERM, then SIGKILL after a grace period; the
// localstack container is terminated. It is a no-op for an external
// endpoint. Stop is idempotent. It reports an error if a server had died
// before Stop was called.
func (e *Emulator) Stop() error {
	if e == nil {
		return nil
	}
	e.stopOnce.Do(func() {
		var errs []error
		if e.dynamo != nil {
			errs = append(errs, e.dynamo.stop(stopGracePeriod))
		}
		switch {
		case e.proc != nil:
			errs = append(errs, e.proc.stop(stopGracePeriod))
		case e.stopContainer != nil:
			errs = append(errs, e.stopContainer())
		}
		e.stopErr = errors.Join(errs...)
	})
	return e.stopErr
}

// AWSConfig returns an aws.Config pointed at the emulator: BaseEndpoint is
// URL, DynamoDB goes to DynamoURL, the credentials are static ("test",
// "test") and the region is Region. Callers set S3 UsePathStyle
// themselves.
//
// DynamoDB is routed the SDK's own way, through ConfigSources (see
// awsconf.ServiceEndpoints), which every client consults for its service,
// so clients built from the config need no options. The SDK skips the
// config sources when AWS_ENDPOINT_URL is set and AWS_ENDPOINT_URL_DYNAMODB
// is not: a process that sets AWS_ENDPOINT_URL=URL after Start must set
// AWS_ENDPOINT_URL_DYNAMODB=DynamoURL too.
//
// Its SDK clients send request bodies that cannot lose answers (see
// sendBodyWithoutWriteTo).
func (e *Emulator) AWSConfig() aws.Config {
	cfg := aws.Config{
		Region:       e.Region,
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		BaseEndpoint: aws.String(e.URL),
		APIOptions:   apiOptions(),
	}
	if e.DynamoURL != "" && e.DynamoURL != e.URL {
		cfg.ConfigSources = []any{awsconf.ServiceEndpoints{"DynamoDB": e.DynamoURL, "DynamoDB Streams": e.DynamoURL}}
	}
	return cfg
}

// ErrResetNotSupported is returned by Reset for emulators other than moto.
var ErrResetNotSupported = errors.New("reset not supported")

// Reset wipes all emulator state (moto: POST /moto-api/reset; a started
// DynamoDB Local: every table is deleted). For an external endpoint it
// works when the endpoint is a moto server; otherwise it returns an error
// wrapping ErrResetNotSupported.
func (e *Emulator) Reset(ctx context.Context) error {
	if !e.motoAPI {
		return fmt.Errorf("emulator %s at %s: %w", e.Kind, e.URL, ErrResetNotSupported)
	}
	if e.dynamo != nil {
		if err := e.resetDynamo(ctx); err != nil {
			return err
		}
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

// resetDynamo deletes every table of the started DynamoDB Local.
func (e *Emulator) resetDynamo(ctx context.Context) error {
	db := dynamodb.NewFromConfig(e.AWSConfig())
	p := dynamodb.NewListTablesPaginator(db, &dynamodb.ListTablesInput{})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("emulator reset: dynamodb local: list tables: %w (log: %s)", err, e.DynamoLogPath)
		}
		for _, name := range page.TableNames {
			if _, err := db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
				return fmt.Errorf("emulator reset: dynamodb local: delete table %s: %w (log: %s)", name, err, e.DynamoLogPath)
			}
		}
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
// answers HTTP at all (any status); moto is recognised by its own API.
func attachExternal(ctx context.Context, url, region string) (*Emulator, error) {
	e := newEmulator(url, region, KindExternal)
	code, err := waitReachable(ctx, e.endpoint("/moto-api/"))
	if err != nil {
		return nil, fmt.Errorf("emulator: %s=%s is not reachable: %w (unset %s to start a local moto server)",
			EnvEndpointURL, url, err, EnvEndpointURL)
	}
	e.motoAPI = code == http.StatusOK
	return e, nil
}

// waitReachable polls url until it answers HTTP, and returns the status.
func waitReachable(ctx context.Context, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, externalCheckTimeout)
	defer cancel()
	for {
		code, err := probe(ctx, url, 2*time.Second)
		if err == nil {
			return code, nil
		}
		select {
		case <-ctx.Done():
			return 0, err
		case <-time.After(healthPollInterval * 4):
		}
	}
}

// startLocalstack starts LocalStack through start, which programs that
// need it link (internal/emulator/localstack): testcontainers-go and its
// Docker client stay out of every other build.
func startLocalstack(ctx context.Context, region string, start StartContainer) (*Emulator, error) {
	if start == nil {
		return nil, fmt.Errorf("emulator: %s=%s: this program cannot start LocalStack; start it yourself and set %s to its endpoint",
			EnvEmulator, KindLocalstack, EnvEndpointURL)
	}
	url, stop, err := start(ctx, region)
	if err != nil {
		return nil, err
	}
	e := newEmulator(url, region, KindLocalstack)
	e.stopContainer = stop
	return e, nil
}
