package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/client"
)

// recorder answers every request with status and body, and keeps the
// requests, so a test can see what the CLI sent where.
type recorder struct {
	mu     sync.Mutex
	reqs   []*http.Request
	status int
	body   string
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return &http.Response{StatusCode: r.status, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(r.body)), Request: req}, nil
}

func runWith(t *testing.T, rec *recorder, vars map[string]string, args ...string) (int, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Main(context.Background(), args, Env{
		Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return vars[k] },
		Now:    time.Now, Loc: time.UTC, HTTP: &http.Client{Transport: rec},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	return code, stderr.String()
}

func writeToken(t *testing.T, path, token string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The CLI finds the local runner's token by itself: BATCHWORK_LOCAL_TOKEN,
// else the file BATCHWORK_LOCAL_TOKEN_FILE names, else the file the runner
// on the endpoint's port wrote in the user's configuration directory. It
// never sends the token to a signed API, and never sends the default
// file's token off this machine.
func TestLocalTokenIsSent(t *testing.T) {
	t.Parallel()
	cfg := t.TempDir()
	writeToken(t, filepath.Join(cfg, "batchwork", "local-8080.token"), "from-default-file")
	writeToken(t, filepath.Join(cfg, "batchwork", "local-9090.token"), "port-9090")
	home := t.TempDir()
	writeToken(t, filepath.Join(home, ".config", "batchwork", "local-8080.token"), "from-home")
	named := filepath.Join(t.TempDir(), "run.token")
	writeToken(t, named, "from-named-file")
	cases := []struct {
		name string
		vars map[string]string
		args []string
		want string // the Authorization header; "" for none
	}{
		{"default file of the endpoint's port",
			map[string]string{"XDG_CONFIG_HOME": cfg}, nil, "Bearer from-default-file"},
		{"another port, another file",
			map[string]string{"XDG_CONFIG_HOME": cfg, "BATCHWORK_ENDPOINT": "http://127.0.0.1:9090"}, nil, "Bearer port-9090"},
		// localhost may resolve to ::1, where another user can listen on
		// the runner's port: the default file goes to loopback addresses
		// only, never to a name.
		{"not to a name that may resolve elsewhere",
			map[string]string{"XDG_CONFIG_HOME": cfg, "BATCHWORK_ENDPOINT": "http://localhost:8080"}, nil, ""},
		{"default file under HOME",
			map[string]string{"HOME": home}, nil, "Bearer from-home"},
		{"BATCHWORK_LOCAL_TOKEN_FILE",
			map[string]string{"XDG_CONFIG_HOME": cfg, "BATCHWORK_LOCAL_TOKEN_FILE": named}, nil, "Bearer from-named-file"},
		{"BATCHWORK_LOCAL_TOKEN wins",
			map[string]string{"XDG_CONFIG_HOME": cfg, "BATCHWORK_LOCAL_TOKEN_FILE": named, "BATCHWORK_LOCAL_TOKEN": "from-env"}, nil, "Bearer from-env"},
		{"no token anywhere",
			map[string]string{"XDG_CONFIG_HOME": t.TempDir()}, nil, ""},
		{"the default file never leaves the machine",
			map[string]string{"XDG_CONFIG_HOME": cfg, "BATCHWORK_ENDPOINT": "https://runner.example.com:8080"}, []string{"--auth", "local"}, ""},
		{"an explicit token goes where it is told",
			map[string]string{"BATCHWORK_LOCAL_TOKEN": "from-env", "BATCHWORK_ENDPOINT": "https://runner.example.com:8080"}, []string{"--auth", "local"}, "Bearer from-env"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{status: http.StatusOK, body: `{"jobs":[]}`}
			vars := map[string]string{"BATCHWORK_ENDPOINT": "http://127.0.0.1:8080", "BATCHWORK_OWNER": "alice"}
			for k, v := range tc.vars {
				vars[k] = v
			}
			code, stderr := runWith(t, rec, vars, append([]string{"list"}, tc.args...)...)
			if code != ExitOK {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			// The list, and the whoami that names the owner of an empty one.
			if len(rec.reqs) == 0 {
				t.Fatal("no request")
			}
			for _, req := range rec.reqs {
				if got := req.Header.Get("Authorization"); got != tc.want {
					t.Errorf("%s: Authorization %q, want %q", req.URL.Path, got, tc.want)
				}
				if got := req.Header.Get(client.OwnerHeader); got != "alice" {
					t.Errorf("%s: %s %q, want alice", req.URL.Path, client.OwnerHeader, got)
				}
			}
		})
	}
}

// A signed request's Authorization is its signature: the local token,
// however it is set, is not sent to a signed API.
func TestLocalTokenNotSentSigned(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	cfg := t.TempDir()
	writeToken(t, filepath.Join(cfg, "batchwork", "local-443.token"), "from-default-file")
	rec := &recorder{status: http.StatusOK, body: `{"jobs":[]}`}
	vars := map[string]string{"BATCHWORK_ENDPOINT": "https://abc.execute-api.eu-west-1.amazonaws.com",
		"BATCHWORK_LOCAL_TOKEN": "from-env", "XDG_CONFIG_HOME": cfg}
	if code, stderr := runWith(t, rec, vars, "list"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	got := rec.reqs[0].Header.Get("Authorization")
	if !strings.HasPrefix(got, "AWS4-HMAC-SHA256 ") || strings.Contains(got, "from-") {
		t.Errorf("Authorization %q, want a SigV4 signature and no local token", got)
	}
}

// When the runner refuses the CLI, the CLI says where it looked for the
// token and how else to give it; a token file it cannot read is an error
// naming the file, not a silent request without a token.
func TestLocalTokenErrors(t *testing.T) {
	t.Parallel()
	refused := `{"code":"unauthenticated","message":"missing the local runner's token","field":"Authorization"}`
	empty := t.TempDir()
	bad := t.TempDir()
	// A directory where the file should be: it exists, and cannot be read.
	if err := os.MkdirAll(filepath.Join(bad, "batchwork", "local-8080.token"), 0o700); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty.token")
	writeToken(t, emptyFile, "")
	cases := []struct {
		name     string
		vars     map[string]string
		code     int
		want     []string // in stderr
		requests int
	}{
		{"no token file", map[string]string{"XDG_CONFIG_HOME": empty}, ExitAuth,
			[]string{"missing the local runner's token", filepath.Join(empty, "batchwork", "local-8080.token"), "BATCHWORK_LOCAL_TOKEN"}, 1},
		{"named file missing", map[string]string{"BATCHWORK_LOCAL_TOKEN_FILE": filepath.Join(empty, "gone.token")}, ExitAuth,
			[]string{"BATCHWORK_LOCAL_TOKEN_FILE", filepath.Join(empty, "gone.token")}, 0},
		{"unreadable token file", map[string]string{"XDG_CONFIG_HOME": bad}, ExitAuth,
			[]string{filepath.Join(bad, "batchwork", "local-8080.token")}, 0},
		{"empty token file", map[string]string{"BATCHWORK_LOCAL_TOKEN_FILE": emptyFile}, ExitAuth,
			[]string{emptyFile, "empty"}, 0},
		{"no HOME", map[string]string{}, ExitAuth,
			[]string{"HOME", "BATCHWORK_LOCAL_TOKEN"}, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{status: http.StatusUnauthorized, body: refused}
			vars := map[string]string{"BATCHWORK_ENDPOINT": "http://127.0.0.1:8080", "BATCHWORK_OWNER": "alice"}
			for k, v := range tc.vars {
				vars[k] = v
			}
			code, stderr := runWith(t, rec, vars, "list")
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr does not mention %q:\n%s", w, stderr)
				}
			}
			if len(rec.reqs) != tc.requests {
				t.Errorf("%d requests sent, want %d", len(rec.reqs), tc.requests)
			}
		})
	}
}
