package awsconf

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// countingRT counts the requests a transport is handed.
type countingRT struct {
	rt http.RoundTripper
	n  atomic.Int32
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

func rpcRequest(t *testing.T, endpoint string) *http.Request {
	r, err := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader([]byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	return r
}

func do(t *testing.T, c httpClient, endpoint string) {
	t.Helper()
	resp, err := c.Do(rpcRequest(t, endpoint))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// net/http.ProxyFromEnvironment's answer is asked once per endpoint and
// kept; the answer kept is the one followed.
func TestProxyFromEnvironmentAskedOncePerEndpoint(t *testing.T) {
	t.Setenv(EnvTransport, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	defer srv.Close()
	cfg := aws.Config{}
	Harden(&cfg)
	c := cfg.HTTPClient.(httpClient)
	if c.viaProxy == nil {
		t.Fatal("the SDK's default proxy rule (ProxyFromEnvironment) is not kept per endpoint")
	}
	full := &countingRT{rt: c.full.Transport}
	c.full.Transport = full
	u, _ := url.Parse(srv.URL)
	k := proxyKey{u.Scheme, u.Host}
	do(t, c, srv.URL)
	if v, ok := c.viaProxy.Load(k); !ok || v.(bool) {
		t.Fatalf("kept answer for %v: %v, %v; want direct", k, v, ok)
	}
	if n := full.n.Load(); n != 0 {
		t.Fatalf("%d requests through net/http, want 0", n)
	}
	c.viaProxy.Store(k, true)
	do(t, c, srv.URL)
	if n := full.n.Load(); n != 1 {
		t.Fatalf("%d requests through net/http after the kept answer named a proxy, want 1", n)
	}
}

// Any other proxy rule is asked on every request: its answer may change.
func TestOtherProxyRuleAskedEveryRequest(t *testing.T) {
	t.Setenv(EnvTransport, "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	defer srv.Close()
	var asked atomic.Int32
	b := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.Proxy = func(*http.Request) (*url.URL, error) { asked.Add(1); return nil, nil }
	})
	cfg := aws.Config{HTTPClient: b}
	Harden(&cfg)
	c := cfg.HTTPClient.(httpClient)
	if c.viaProxy != nil {
		t.Fatal("a caller's proxy rule's answers are kept")
	}
	for range 3 {
		do(t, c, srv.URL)
	}
	if n := asked.Load(); n != 3 {
		t.Fatalf("proxy rule asked %d times for 3 requests, want 3", n)
	}
}
