package cli

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/internal/console"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// batchwork ui against a deployed API: the console's calls reach the API
// signed with SigV4 from the CLI's credentials, and neither the signature
// nor the credentials reach the page.
func TestUIProxiesWithSigV4(t *testing.T) {
	var mu sync.Mutex
	var got []string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/jobs/j000000000000000000001" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"not_found","message":"no such job","field":""}`)
			return
		}
		_, _ = io.WriteString(w, `{"jobs":[]}`)
	}))
	defer api.Close()
	vars := map[string]string{"AWS_ACCESS_KEY_ID": "AKIDEXAMPLE", "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
		"AWS_SESSION_TOKEN": "session-token-secret", "AWS_CONFIG_FILE": "/nonexistent", "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent"}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut lockedBuffer
	code := make(chan int, 1)
	go func() {
		code <- Main(ctx, []string{"ui", "--listen", "127.0.0.1:0", "--endpoint", api.URL, "--auth", "sigv4", "--region", "eu-west-1"}, Env{
			Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
			Now: time.Now, Loc: time.UTC, HTTP: &http.Client{}, Sleep: client.Sleep,
		})
	}()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+/[0-9a-f]{32}/`)
	var u string
	for deadline := time.Now().Add(10 * time.Second); u == ""; {
		select {
		case c := <-code:
			t.Fatalf("ui exited %d: %s", c, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no URL: %q %q", out.String(), errOut.String())
		}
		u = re.FindString(out.String())
		time.Sleep(10 * time.Millisecond) // waiting for another goroutine's output
	}
	get := func(path string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, u+path, nil)
		req.Header.Set(console.APIHeader, "1")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for k, vs := range resp.Header {
			for _, v := range vs {
				b = append(b, []byte(k+": "+v+"\n")...)
			}
		}
		return resp.StatusCode, string(b)
	}
	if c, body := get("api/jobs?status=RUNNING"); c != 200 || !strings.HasPrefix(body, `{"jobs":[]}`) {
		t.Fatalf("jobs: %d %s", c, body)
	}
	if c, body := get("api/jobs/j000000000000000000001"); c != 404 || !strings.Contains(body, "no such job") {
		t.Fatalf("a missing job: %d %s, want the API's 404", c, body)
	}
	for _, path := range []string{"api/jobs", "api/jobs/j000000000000000000001", "api/info"} {
		_, body := get(path)
		for _, secret := range []string{"AWS4-HMAC-SHA256", "AKIDEXAMPLE", vars["AWS_SECRET_ACCESS_KEY"], "session-token-secret"} {
			if strings.Contains(body, secret) {
				t.Fatalf("%s: the answer to the page carries %q:\n%s", path, secret, body)
			}
		}
	}
	mu.Lock()
	calls := got
	mu.Unlock()
	if len(calls) < 2 || !strings.HasPrefix(calls[0], "GET /jobs?status=RUNNING AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") ||
		!strings.Contains(calls[0], "/eu-west-1/execute-api/aws4_request") {
		t.Fatalf("calls the API got: %q", calls)
	}
	cancel()
	if c := <-code; c != ExitOK {
		t.Fatalf("ui: exit %d: %s", c, errOut.String())
	}
}
