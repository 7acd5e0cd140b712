package cli

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
)

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
		a := &app{env: Env{Now: time.Now, HTTP: &http.Client{}, Sleep: client.Sleep, Getenv: func(string) string { return "" }}, g: globals{endpoint: tc.endpoint, auth: tc.auth, owner: "alice", region: "eu-west-1"}}
		c, err := a.client(context.Background())
		if err != nil {
			t.Fatalf("%s %s: %v", tc.endpoint, tc.auth, err)
		}
		_, local := c.Signer.(client.LocalOwner)
		if local != tc.local {
			t.Errorf("%s with --auth %s: local owner %v, want %v", tc.endpoint, tc.auth, local, tc.local)
		}
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
