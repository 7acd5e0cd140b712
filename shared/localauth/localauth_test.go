package localauth

import (
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNewTokenIsFreshAndLong(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		tok, err := NewToken()
		if err != nil {
			t.Fatal(err)
		}
		// 32 random bytes in unpadded base64url: 256 bits, and safe in a
		// header and a file without quoting.
		if len(tok) != 43 || strings.ContainsAny(tok, "+/= \n") {
			t.Fatalf("token %q: want 43 base64url characters", tok)
		}
		if seen[tok] {
			t.Fatalf("token %q made twice", tok)
		}
		seen[tok] = true
	}
}

// Every request must carry the run's token, whatever else it has: the
// handler behind is reached only with it.
func TestRequire(t *testing.T) {
	t.Parallel()
	const token = "s3cr3t-token-value-0123456789abcdefghijklm"
	cases := []struct {
		name, auth string
		want       int
		msg        string // in the refusal's message
	}{
		{"no header", "", http.StatusUnauthorized, "missing"},
		{"wrong token", "Bearer " + strings.Repeat("x", len(token)), http.StatusUnauthorized, "wrong"},
		{"shorter token", "Bearer " + token[:10], http.StatusUnauthorized, "wrong"},
		{"token with a suffix", "Bearer " + token + "x", http.StatusUnauthorized, "wrong"},
		{"empty bearer", "Bearer ", http.StatusUnauthorized, "missing"},
		{"token without scheme", token, http.StatusUnauthorized, "missing"},
		{"basic scheme", "Basic " + token, http.StatusUnauthorized, "missing"},
		{"sigv4", "AWS4-HMAC-SHA256 Credential=AKID/20261121/eu-west-1/execute-api/aws4_request", http.StatusUnauthorized, "missing"},
		{"good token", "Bearer " + token, http.StatusOK, ""},
		{"scheme in lower case", "bearer " + token, http.StatusOK, ""},
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	h := Require(token, next)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodGet, "/jobs", nil)
			// A loopback peer that named the runner by a loopback name:
			// the token is required all the same.
			req.RemoteAddr, req.Host = "127.0.0.1:5000", "127.0.0.1:8080"
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.want {
				t.Fatalf("status %d, want %d", rec.Code, tc.want)
			}
			if tc.want == http.StatusOK {
				return
			}
			if got := rec.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
				t.Errorf("WWW-Authenticate %q, want a Bearer challenge", got)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q, want application/json", ct)
			}
			var e struct{ Code, Message, Field string }
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			if e.Code != "unauthenticated" || e.Field != "Authorization" || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("refusal %+v: want code unauthenticated, field Authorization, a message saying %q", e, tc.msg)
			}
			if strings.Contains(rec.Body.String(), token) {
				t.Errorf("the refusal shows the token: %s", rec.Body)
			}
		})
	}
}

func TestRequirePanicsWithoutToken(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("Require with an empty token did not panic: it would let anyone in")
		}
	}()
	Require("", http.NotFoundHandler())
}

func TestSetHeader(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "/jobs", nil)
	SetHeader(req, "abc")
	if got := req.Header.Get("Authorization"); got != "Bearer abc" {
		t.Errorf("Authorization %q, want %q", got, "Bearer abc")
	}
}

// The token file is the user's alone, even when it existed before with a
// wider mode or the umask is lax, and the directory made for it too.
func TestWriteFileIsPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh", "batchwork")
	path := filepath.Join(dir, "local-8080.token")
	if err := WriteFile(path, "first"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, dir, 0o700)
	checkMode(t, path, 0o600)

	// A stale file left readable by others is replaced, not reused.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, "second"); err != nil {
		t.Fatal(err)
	}
	checkMode(t, path, 0o600)
	got, err := ReadFile(path)
	if err != nil || got != "second" {
		t.Fatalf("ReadFile = %q, %v; want %q", got, err, "second")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the token file (no temporary left over)", len(entries))
	}
}

// A symbolic link planted at the token's path is replaced, not followed:
// the token is never written where someone else pointed it.
func TestWriteFileDoesNotFollowALink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "elsewhere")
	if err := os.WriteFile(target, []byte("untouched"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "local-8080.token")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, "tok"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "untouched" {
		t.Errorf("the link's target was written: %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSymlink != 0 {
		t.Errorf("the token path is still a link (%v)", err)
	}
}

func checkMode(t *testing.T, path string, want fs.FileMode) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != want {
		t.Errorf("%s has mode %#o, want %#o", path, got, want)
	}
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, path, want string
		err              string
		notExist         bool
	}{
		{"token", write("a", "tok\n"), "tok", "", false},
		{"surrounding space", write("b", "  tok \r\n"), "tok", "", false},
		{"empty", write("c", "\n"), "", "is empty", false},
		{"two lines", write("d", "tok\nmore\n"), "", "more than one line", false},
		{"missing", filepath.Join(dir, "none"), "", "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReadFile(tc.path)
			switch {
			case tc.notExist:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("err %v, want one that is fs.ErrNotExist", err)
				}
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.path) {
					t.Fatalf("err %v, want one naming %s and saying %q", err, tc.path, tc.err)
				}
			default:
				if err != nil || got != tc.want {
					t.Fatalf("ReadFile = %q, %v; want %q", got, err, tc.want)
				}
			}
		})
	}
}

// The default file is per user (in the user's configuration directory,
// XDG style on every system, as the paths in the README say) and per port, so runners on two ports, or of two users, never share one.
func TestDefaultFile(t *testing.T) {
	t.Parallel()
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	cases := []struct {
		name   string
		getenv func(string) string
		port   string
		want   string
		err    string
	}{
		{"XDG_CONFIG_HOME", env("XDG_CONFIG_HOME", "/cfg", "HOME", "/home/u"), "8080", "/cfg/batchwork/local-8080.token", ""},
		{"HOME", env("HOME", "/home/u"), "9000", "/home/u/.config/batchwork/local-9000.token", ""},
		{"relative XDG_CONFIG_HOME", env("XDG_CONFIG_HOME", "cfg", "HOME", "/home/u"), "8080", "", "XDG_CONFIG_HOME"},
		{"no home", env(), "8080", "", "HOME"},
		{"no port", env("HOME", "/home/u"), "", "", "port"},
		{"port not a number", env("HOME", "/home/u"), "../x", "", "port"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := DefaultFile(tc.getenv, tc.port)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("DefaultFile = %q, %v; want an error naming %s", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("DefaultFile = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// Remove deletes the file only while it still holds this run's token, so
// a runner that stops never deletes the token of one that started after.
func TestRemoveIfOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "local-8080.token")
	if err := WriteFile(path, "theirs"); err != nil {
		t.Fatal(err)
	}
	if err := RemoveIfOwn(path, "mine"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("another run's token file was removed: %v", err)
	}
	if err := RemoveIfOwn(path, "theirs"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("own token file not removed: %v", err)
	}
	if err := RemoveIfOwn(path, "theirs"); err != nil {
		t.Fatalf("removing a file already gone: %v", err)
	}
}
