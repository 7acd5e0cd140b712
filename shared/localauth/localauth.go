// Package localauth is the local runner's per-run API token. Loopback is
// not a boundary: a web page can reach 127.0.0.1 (DNS rebinding), and an
// SSH port-forward delivers other people's connections from loopback too.
// So batchwork-local makes a random token when it starts, requires it on
// every request (Authorization: Bearer), and leaves it in a file only its
// user can read, where the batchwork CLI of that same user finds it. A
// browser page cannot read that file, and no route hands the token out.
//
// The package is small on purpose: the CLI uses it too, and must not pull
// in the runner.
package localauth

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	// TokenEnv gives the batchwork CLI the token itself.
	TokenEnv = "BATCHWORK_LOCAL_TOKEN"
	// TokenFileEnv names the token file, for batchwork-local (where to
	// write it) and for the CLI (where to read it), instead of the
	// default per-port file.
	TokenFileEnv = "BATCHWORK_LOCAL_TOKEN_FILE"
)

// NewToken returns 32 bytes from crypto/rand in unpadded base64url: 256
// bits no one can guess, and nothing a header or a file needs to quote.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("make the local runner's token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// SetHeader puts the token on a request to the local runner.
func SetHeader(req *http.Request, token string) {
	req.Header.Set("Authorization", "Bearer "+token)
}

// Require serves next only to requests that carry token as a bearer token,
// and answers every other request 401, whatever its peer or Host. That
// covers the OpenAPI document and unknown paths too, so a caller without
// the token learns nothing, not even that a Batchwork runner is there.
func Require(token string, next http.Handler) http.Handler {
	if token == "" {
		// An empty token would match "Bearer " and let anyone in.
		panic("localauth.Require: empty token")
	}
	// Comparing hashes keeps the comparison constant-time whatever length
	// the caller sends.
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			refuse(w, "missing the local runner's token: send it as \"Authorization: Bearer <token>\"; "+
				"batchwork-local writes it to the token file it names at start, where the batchwork CLI reads it")
			return
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			refuse(w, "wrong local runner token in Authorization: every batchwork-local run makes a new one; "+
				"read it again from the token file the running one named at start")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// bearer takes the token out of an Authorization value. The scheme is
// case-insensitive (RFC 9110, section 11.1).
func bearer(v string) (string, bool) {
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}

// refuse answers 401 with the API's error body (shared/api.Error), so
// clients report it like any other API error.
func refuse(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="batchwork-local"`)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_ = json.NewEncoder(w).Encode(struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Field   string `json:"field"`
	}{"unauthenticated", msg, "Authorization"})
}

// DefaultDir is where token files go by default: batchwork in the user's
// configuration directory ($XDG_CONFIG_HOME, else ~/.config), on every
// system, so the path is the same one docs/cli.md gives. getenv is
// os.Getenv, or a test's.
func DefaultDir(getenv func(string) string) (string, error) {
	if d := getenv("XDG_CONFIG_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", fmt.Errorf("XDG_CONFIG_HOME %q is not an absolute path (set %s instead)", d, TokenFileEnv)
		}
		return filepath.Join(d, "batchwork"), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", fmt.Errorf("neither XDG_CONFIG_HOME nor HOME is set, so there is no default token file (set %s)", TokenFileEnv)
	}
	return filepath.Join(home, ".config", "batchwork"), nil
}

// File is the token file of the runner on port in dir. One file per port:
// runners on two ports each have their own, and the CLI knows the port
// from its endpoint.
func File(dir, port string) (string, error) {
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return "", fmt.Errorf("token file: port %q is not a TCP port number", port)
	}
	return filepath.Join(dir, "local-"+port+".token"), nil
}

// DefaultFile is File in DefaultDir.
func DefaultFile(getenv func(string) string, port string) (string, error) {
	dir, err := DefaultDir(getenv)
	if err != nil {
		return "", err
	}
	return File(dir, port)
}

// WriteFile writes token to path, readable and writable by the user only
// (0600), making the directory (0700) if needed. The token goes into a new
// file that replaces path: an existing file with a wider mode is never
// reused, and a symbolic link planted at path is replaced, not followed.
func WriteFile(path, token string) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	// CreateTemp makes the file 0600 whatever the umask.
	f, err := os.CreateTemp(dir, ".token-*")
	if err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a failure; after the rename it is gone
	if _, err := f.WriteString(token + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("token file %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a token file. A missing file is an error that is
// fs.ErrNotExist, so a caller can tell "no runner wrote one" apart.
func ReadFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the local runner's token: %w", err)
	}
	tok := string(bytes.TrimSpace(b))
	switch {
	case tok == "":
		return "", fmt.Errorf("token file %s is empty", path)
	case strings.ContainsAny(tok, "\r\n"):
		return "", fmt.Errorf("token file %s has more than one line; want the token alone", path)
	}
	return tok, nil
}

// RemoveIfOwn removes path if it still holds token: a runner that stops
// must not delete the file of a runner that started after it on the same
// port. A file already gone is fine.
func RemoveIfOwn(path, token string) error {
	got, err := ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil || got != token {
		return nil // not ours (or not a token): leave it alone
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the token file %s: %w", path, err)
	}
	return nil
}
