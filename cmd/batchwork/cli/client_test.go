package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

func TestRegionOfHost(t *testing.T) {
	t.Parallel()
	for host, want := range map[string]string{
		"abc123.execute-api.eu-west-1.amazonaws.com": "eu-west-1",
		"abc123.execute-api.us-east-1.amazonaws.com": "us-east-1",
		"api.example.com": "",
		"127.0.0.1":       "",
	} {
		if got := regionOfHost(host); got != want {
			t.Errorf("regionOfHost(%q) = %q, want %q", host, got, want)
		}
	}
}

func TestAuthModeFollowsEndpoint(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	cases := []struct {
		endpoint, auth string
		local          bool
	}{
		{"http://127.0.0.1:8080", "auto", true},
		{"http://localhost:8080", "auto", true},
		{"https://abc.execute-api.eu-west-1.amazonaws.com/prod", "auto", false},
		{"http://127.0.0.1:8080", "sigv4", false},
		{"https://api.example.com", "local", true},
	}
	for _, tc := range cases {
		a := &app{env: Env{Now: time.Now, HTTP: &http.Client{}, Sleep: sleepCtx, Getenv: func(string) string { return "" }}, g: globals{endpoint: tc.endpoint, auth: tc.auth, owner: "alice", region: "eu-west-1"}}
		c, err := a.client(context.Background())
		if err != nil {
			t.Fatalf("%s %s: %v", tc.endpoint, tc.auth, err)
		}
		_, local := c.signer.(localOwner)
		if local != tc.local {
			t.Errorf("%s with --auth %s: local owner %v, want %v", tc.endpoint, tc.auth, local, tc.local)
		}
	}
}

// A signed request arrives with a signature the server can check: it
// re-signs what it received with the same credentials and time and must
// get the same Authorization, so nothing was changed after signing (body,
// query, headers); and the owner header, which only the local runner
// trusts, is never sent to a signed API.
func TestSigV4RequestVerifies(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "secret", Source: "test"}
	now := time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC)
	var checked atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := r.Header.Get("Authorization")
		if !strings.HasPrefix(got, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261121/eu-west-1/execute-api/aws4_request") {
			t.Errorf("Authorization %q", got)
		}
		if r.Header.Get(OwnerHeader) != "" {
			t.Errorf("a signed request carries %s", OwnerHeader)
		}
		re, _ := http.NewRequest(r.Method, "http://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
		for k, vs := range r.Header {
			if k != "Authorization" && k != "Accept-Encoding" {
				re.Header[k] = vs
			}
		}
		hash := r.Header.Get("X-Amz-Content-Sha256")
		if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, hash, "execute-api", "eu-west-1", now); err != nil {
			t.Error(err)
		}
		if want := re.Header.Get("Authorization"); want != got {
			t.Errorf("signature does not verify:\n got  %s\n want %s", got, want)
		}
		checked.Store(true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jobId":"j0123456789a0123456789","created":true}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL + "/prod")
	c := &client{base: u, http: srv.Client(), retries: 0, sleep: sleepCtx,
		signer: &sigv4{creds: credentials.StaticCredentialsProvider{Value: creds}, region: "eu-west-1", now: func() time.Time { return now }}}
	var out map[string]any
	err := c.call(context.Background(), http.MethodPost, "/jobs", url.Values{"a": {"b c"}}, []byte("name: x\n"),
		http.Header{"Idempotency-Key": {"k1"}, "Content-Type": {"application/yaml"}}, &out)
	if err != nil || !checked.Load() {
		t.Fatalf("call: %v (checked %v)", err, checked.Load())
	}
}

// Throttling and gateway errors are retried with the same request; other
// errors are not.
func TestClientRetries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/flaky") && n < 3:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"message":"Service Unavailable"}`))
		case strings.HasSuffix(r.URL.Path, "/bad"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"invalid_request","message":"must be positive","field":"limit"}`))
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	c := &client{base: u, http: srv.Client(), retries: 3, signer: localOwner{owner: "a"},
		sleep: func(context.Context, time.Duration) error { return nil }}
	if err := c.call(context.Background(), http.MethodGet, "/flaky", nil, nil, nil, nil); err != nil || calls.Load() != 3 {
		t.Fatalf("flaky: %v after %d calls, want success after 3", err, calls.Load())
	}
	calls.Store(0)
	err := c.call(context.Background(), http.MethodGet, "/bad", nil, nil, nil, nil)
	ae, ok := err.(*APIError)
	if !ok || ae.Status != 400 || ae.Error() != "limit: must be positive" || calls.Load() != 1 {
		t.Fatalf("bad: %v after %d calls", err, calls.Load())
	}
}

// The CLI never signs a request for a plain-http endpoint off this machine.
func TestNoSignedRequestsOverPlainHTTP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		endpoint string
		refused  bool
	}{
		{"http://api.example.com", true},
		{"https://api.example.com", false},
		{"http://127.0.0.1:8080", false},
	} {
		a := &app{g: globals{endpoint: tc.endpoint, auth: "sigv4", region: "eu-west-1"}, env: Env{HTTP: &http.Client{}, Getenv: func(string) string { return "" }}}
		_, err := a.client(context.Background())
		var ue *usageError
		if refused := errors.As(err, &ue); refused != tc.refused {
			t.Errorf("%s: err %v, want refused=%v", tc.endpoint, err, tc.refused)
		}
	}
}

// The CLI's HTTP client follows no redirect: one would take the owner
// header, a session token and the spec wherever the server says.
func TestCLIFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var followed atomic.Bool
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true) }))
	defer target.Close()
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/jobs", http.StatusTemporaryRedirect)
	}))
	defer redirector.Close()
	req, err := http.NewRequest(http.MethodPost, redirector.URL+"/jobs", strings.NewReader("name: x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Batchwork-Owner", "alice")
	resp, err := OSEnv().HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTemporaryRedirect || followed.Load() {
		t.Fatalf("status %d, followed %v; want the 307 itself, not followed", resp.StatusCode, followed.Load())
	}
}
