package awsconf

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/batchwork/batchwork/shared/synchttp"
)

// EnvTransport names the variable that picks the transport of the JSON RPC
// requests: "net" for net/http's (the SDK's transport, to compare),
// anything else ("" or "sync") for shared/synchttp's.
const EnvTransport = "BATCHWORK_HTTP_TRANSPORT"

// MaxIdleConnsPerHost is how many idle connections a process keeps to each
// AWS endpoint. The SDK's default of 10 is below the requests a busy
// process has in flight to one endpoint (16 executor slots, the count
// batcher, the heartbeats and the sweep all call DynamoDB): past it every
// response's connection is closed and the next request dials a new one,
// which cost about 5% of the bench process's CPU.
const MaxIdleConnsPerHost = 256

// httpClient is the HTTP client of a process's AWS clients: the SDK's own
// (its transport, dialer, redirect rules) with MaxIdleConnsPerHost, and
// requests of the JSON RPC protocols (DynamoDB, SQS, EventBridge: the ones
// with an X-Amz-Target header, POSTed to the endpoint's root, which AWS
// never redirects) sent straight to a transport: shared/synchttp's, which
// reads the answer in the caller's goroutine (net/http's hands each
// request and answer between the caller and a connection's read and write
// loops: about 20 µs more CPU per request on loopback), or the SDK's with
// EnvTransport=net or when its proxy rule names a proxy for the request. http.Client.Do copies every
// request's headers in case it follows a redirect, which cost about 4% of
// the bench process's CPU; other requests (S3's REST calls, which a new
// bucket may answer with a 307) still go through it.
type httpClient struct {
	full *http.Client
	// idlePerHost is its transport's MaxIdleConnsPerHost (the SDK's
	// wrapper hides the transport).
	idlePerHost int
	// rpc sends the JSON RPC requests.
	rpc http.RoundTripper
	// proxy is the SDK transport's proxy rule (nil: none): a request it
	// sends through a proxy goes to full's transport, which speaks to
	// proxies.
	proxy func(*http.Request) (*url.URL, error)
	// viaProxy, when not nil, holds proxy's answer per endpoint (a
	// proxyKey's: true when it names a proxy or fails): set when proxy is
	// http.ProxyFromEnvironment, whose answer depends only on the URL's
	// scheme and host (it reads the environment once per process) and
	// costs a parse of the host and a walk of NO_PROXY per request.
	viaProxy *sync.Map
}

type proxyKey struct{ scheme, host string }

// newHTTPClient builds it from the config's client: the SDK's buildable
// client (config.LoadDefaultConfig's) or none. Any other client is the
// caller's and is kept; so is a client with a timeout (http.Client
// enforces it, the transport does not) or a config whose defaults mode
// would have the SDK adjust the buildable client per service.
func newHTTPClient(cfg aws.Config) aws.HTTPClient {
	b, ok := cfg.HTTPClient.(*awshttp.BuildableClient)
	switch {
	case cfg.HTTPClient == nil:
		b = awshttp.NewBuildableClient()
	case !ok:
		return cfg.HTTPClient
	}
	b = b.WithTransportOptions(func(t *http.Transport) { t.MaxIdleConnsPerHost = max(t.MaxIdleConnsPerHost, MaxIdleConnsPerHost) })
	if cfg.DefaultsMode != "" && cfg.DefaultsMode != aws.DefaultsModeLegacy || b.GetTimeout() != 0 {
		return b
	}
	full, ok := b.Freeze().(*http.Client)
	if !ok || full.Transport == nil {
		return b
	}
	tr := b.GetTransport()
	c := httpClient{full: full, idlePerHost: tr.MaxIdleConnsPerHost, rpc: full.Transport}
	if os.Getenv(EnvTransport) != "net" {
		dial := tr.DialContext
		if dial == nil {
			dial = b.GetDialer().DialContext
		}
		c.rpc = synchttp.New(synchttp.Config{
			DialContext:         dial,
			TLSClientConfig:     tr.TLSClientConfig,
			TLSHandshakeTimeout: tr.TLSHandshakeTimeout,
			MaxIdleConnsPerHost: tr.MaxIdleConnsPerHost,
			IdleConnTimeout:     tr.IdleConnTimeout,
		})
		c.proxy = tr.Proxy
		if c.proxy != nil && reflect.ValueOf(c.proxy).Pointer() == reflect.ValueOf(http.ProxyFromEnvironment).Pointer() {
			c.viaProxy = &sync.Map{}
		}
	}
	return c
}

func (c httpClient) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("X-Amz-Target") == "" {
		return c.full.Do(withoutWriteTo(req))
	}
	rt := c.rpc
	if c.proxy != nil && c.proxied(req) {
		rt = c.full.Transport
		req = withoutWriteTo(req)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		// As http.Client wraps it: the SDK's retryer reads connection
		// errors through *url.Error.
		return nil, &url.Error{Op: req.Method[:1] + strings.ToLower(req.Method[1:]), URL: req.URL.String(), Err: err}
	}
	return resp, nil
}

// proxied says whether the proxy rule sends req through a proxy (or fails,
// which full's transport then reports).
func (c httpClient) proxied(req *http.Request) bool {
	if c.viaProxy == nil {
		u, err := c.proxy(req)
		return u != nil || err != nil
	}
	k := proxyKey{req.URL.Scheme, req.URL.Host}
	if v, ok := c.viaProxy.Load(k); ok {
		return v.(bool)
	}
	u, err := c.proxy(req)
	via := u != nil || err != nil
	c.viaProxy.Store(k, via)
	return via
}

// withoutWriteTo hands net/http req with a body that has only Read and
// Close. smithy-go closes a request's body as soon as the answer's header
// arrives, and its closed body's WriteTo returns io.EOF; net/http's write
// loop, which after Content-Length bytes reads the body once more (through
// WriteTo, when there is one) to check for extra bytes, takes that io.EOF
// for a failed write and closes the connection under the answer being
// read. The SDK then retries a request the service applied
// (aws-sdk-go-v2 #2737; measured against a local server: 14 answers lost
// in 17,000 requests). Through Read a closed body ends with io.EOF, which
// net/http expects. shared/synchttp writes the whole request before it
// reads the answer, so its requests need no wrapper.
func withoutWriteTo(req *http.Request) *http.Request {
	if _, ok := req.Body.(io.WriterTo); !ok {
		return req
	}
	r := *req
	r.Body = readCloser{req.Body}
	return &r
}

// readCloser hides every method of its body but Read and Close.
type readCloser struct{ b io.ReadCloser }

func (r readCloser) Read(p []byte) (int, error) { return r.b.Read(p) }
func (r readCloser) Close() error               { return r.b.Close() }
