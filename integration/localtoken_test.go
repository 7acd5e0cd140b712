package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/api"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
)

// The local runner serves only requests that carry its per-run token.
// Loopback and a loopback Host are not enough: a web page that rebinds
// its name to 127.0.0.1 and an SSH port-forward both arrive from
// loopback, and either can send any Host it likes.
func TestLocalRunnerRequiresToken(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	tok := e.r.Token
	if len(tok) < 40 {
		t.Fatalf("the runner's token %q is not a fresh random token", tok)
	}
	other, err := localauth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(strings.TrimPrefix(e.r.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	good, wrong, another := "Bearer "+tok, "Bearer "+strings.Repeat("A", len(tok)), "Bearer "+other
	spec := `{"name":"t","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`
	fakeJob := "/jobs/j19aa5e7c2a1f3b9d0e4c7"
	cases := []struct {
		name, method, path, auth, host string
		want                           int
	}{
		{"list without a token", "GET", "/jobs", "", "", 401},
		{"submit without a token", "POST", "/jobs", "", "", 401},
		{"cancel without a token", "POST", fakeJob + "/cancel", "", "", 401},
		{"schedules without a token", "GET", "/schedules", "", "", 401},
		{"the OpenAPI document without a token", "GET", "/openapi.yaml", "", "", 401},
		{"an unknown route without a token", "GET", "/nope", "", "", 401},
		{"localhost without a token", "GET", "/jobs", "", "localhost:" + port, 401},
		{"list with a wrong token", "GET", "/jobs", wrong, "", 401},
		{"submit with a wrong token", "POST", "/jobs", wrong, "", 401},
		{"another run's token", "GET", "/jobs", another, "", 401},
		{"the token without its scheme", "GET", "/jobs", tok, "", 401},
		{"the token as a password", "GET", "/jobs", "Basic " + tok, "", 401},
		{"list with the token", "GET", "/jobs", good, "", 200},
		{"localhost with the token", "GET", "/jobs", good, "localhost:" + port, 200},
		{"the OpenAPI document with the token", "GET", "/openapi.yaml", good, "", 200},
		{"submit with the token", "POST", "/jobs", good, "", 201},
		// The token does not lift the Host check (LoopbackOwner).
		{"a rebinding Host with the token", "GET", "/jobs", good, "evil.example.com:" + port, 401},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.method == "POST" {
				body = strings.NewReader(spec)
			}
			req, err := http.NewRequest(tc.method, e.r.URL+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set(runner.OwnerHeader, "tester")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k-"+tc.name)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.want {
				t.Fatalf("%s %s: %d %.200s, want %d", tc.method, tc.path, resp.StatusCode, raw, tc.want)
			}
			if tc.want != 401 {
				return
			}
			var ae api.Error
			if err := json.Unmarshal(raw, &ae); err != nil || ae.Code != "unauthenticated" || ae.Message == "" {
				t.Fatalf("refusal %q is not the API's unauthenticated error: %v", raw, err)
			}
			if tc.host == "" && ae.Field != "Authorization" {
				t.Errorf("refusal names field %q, want Authorization", ae.Field)
			}
			if bytes.Contains(raw, []byte(tok)) {
				t.Errorf("a refusal shows the token: %s", raw)
			}
		})
	}
	// The refused submissions wrote nothing: only the one with the token
	// made a job.
	jobs, err := e.r.Service.ListJobs(context.Background(), control.ListJobsRequest{Owner: "tester"})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs.Jobs) != 1 {
		t.Fatalf("%d jobs exist, want the 1 submitted with the token: %+v", len(jobs.Jobs), jobs.Jobs)
	}
}

// The runner leaves its token where only its user can read it (0600),
// the batchwork CLI of that user finds it there with no setting, and the
// runner takes the file away when it stops.
func TestLocalRunnerTokenFile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	cases := []struct {
		name string
		// opts places the file; env is what the CLI then needs to find it.
		opts func(cfgHome string) runner.Options
		env  func(cfgHome, file string) map[string]string
	}{
		{"per port in the user's configuration directory",
			func(cfgHome string) runner.Options {
				return runner.Options{TokenDir: filepath.Join(cfgHome, "batchwork")}
			},
			func(cfgHome, _ string) map[string]string { return map[string]string{"XDG_CONFIG_HOME": cfgHome} }},
		{"a file named by the caller",
			func(cfgHome string) runner.Options {
				return runner.Options{TokenFile: filepath.Join(cfgHome, "elsewhere", "run.token")}
			},
			func(_, file string) map[string]string { return map[string]string{localauth.TokenFileEnv: file} }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfgHome := t.TempDir()
			o := tc.opts(cfgHome)
			o.AWS, o.Resources, o.Registry, o.ControlOnly = e.cfg, &e.r.Resources, e.reg, true
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			r, err := runner.New(ctx, o)
			if err != nil {
				t.Fatal(err)
			}
			if r.Token == "" || r.Token == e.r.Token {
				t.Fatalf("token %q: want a fresh one per run", r.Token)
			}
			want := o.TokenFile
			if want == "" {
				_, port, _ := net.SplitHostPort(strings.TrimPrefix(r.URL, "http://"))
				want = filepath.Join(o.TokenDir, "local-"+port+".token")
			}
			if r.TokenFile != want {
				t.Fatalf("TokenFile %q, want %q", r.TokenFile, want)
			}
			fi, err := os.Stat(want)
			if err != nil {
				t.Fatalf("no token file: %v", err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("token file mode %#o, want 0600", fi.Mode().Perm())
			}
			if got, err := localauth.ReadFile(want); err != nil || got != r.Token {
				t.Errorf("token file holds %q (%v), want the runner's token", got, err)
			}
			done := make(chan struct{})
			go func() { defer close(done); r.ServeAPI(ctx) }()

			vars := tc.env(cfgHome, want)
			vars["BATCHWORK_ENDPOINT"], vars["BATCHWORK_OWNER"] = r.URL, "tester"
			var out, errOut syncBuffer
			if code := cliMain(ctx, vars, &out, &errOut, "list", "-o", "json"); code != cli.ExitOK {
				t.Fatalf("the CLI with the token file: exit %d: %s", code, errOut.String())
			}
			// Without it (another user, say), the CLI is refused and says
			// where it looked.
			stranger := t.TempDir()
			var sOut, sErr syncBuffer
			code := cliMain(ctx, map[string]string{"BATCHWORK_ENDPOINT": r.URL, "BATCHWORK_OWNER": "tester", "XDG_CONFIG_HOME": stranger},
				&sOut, &sErr, "list")
			if code != cli.ExitAuth || !strings.Contains(sErr.String(), stranger) || !strings.Contains(sErr.String(), localauth.TokenEnv) {
				t.Errorf("the CLI without the token: exit %d, want %d and a message naming where it looked and %s:\n%s",
					code, cli.ExitAuth, localauth.TokenEnv, sErr.String())
			}

			cancel()
			<-done
			if _, err := os.Stat(want); !os.IsNotExist(err) {
				t.Errorf("the token file outlived its runner: %v", err)
			}
		})
	}
}

// cliMain runs the batchwork command with exactly vars as its environment.
func cliMain(ctx context.Context, vars map[string]string, stdout, stderr *syncBuffer, args ...string) int {
	return cli.Main(ctx, args, cli.Env{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Getenv: func(k string) string { return vars[k] },
		Now:    time.Now, Loc: time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
}
