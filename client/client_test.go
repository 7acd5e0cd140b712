package client

import (
	"bytes"
	"context"
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
		if got := RegionOfHost(host); got != want {
			t.Errorf("RegionOfHost(%q) = %q, want %q", host, got, want)
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
	c := &Client{Endpoint: u, HTTP: srv.Client(), Retries: 0, Sleep: Sleep,
		Signer: &SigV4{Credentials: credentials.StaticCredentialsProvider{Value: creds}, Region: "eu-west-1", Now: func() time.Time { return now }}}
	var out map[string]any
	err := c.Call(context.Background(), http.MethodPost, "/jobs", url.Values{"a": {"b c"}}, []byte("name: x\n"),
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
	c := &Client{Endpoint: u, HTTP: srv.Client(), Retries: 3, Signer: LocalOwner{Owner: "a"},
		Sleep: func(context.Context, time.Duration) error { return nil }}
	if err := c.Call(context.Background(), http.MethodGet, "/flaky", nil, nil, nil, nil); err != nil || calls.Load() != 3 {
		t.Fatalf("flaky: %v after %d calls, want success after 3", err, calls.Load())
	}
	calls.Store(0)
	err := c.Call(context.Background(), http.MethodGet, "/bad", nil, nil, nil, nil)
	ae, ok := err.(*APIError)
	if !ok || ae.Status != 400 || ae.Error() != "limit: must be positive" || calls.Load() != 1 {
		t.Fatalf("bad: %v after %d calls", err, calls.Load())
	}
}
