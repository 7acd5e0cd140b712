package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/control"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fixtureAPI serves the API answers in testdata. Each fixture must decode,
// strictly, into the control plane's own types, so a renamed or removed
// field breaks this test instead of leaving the fixtures stale.
func fixtureAPI(t *testing.T) *httptest.Server {
	t.Helper()
	load := func(name string, v any) []byte {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			t.Fatalf("fixture %s does not match the API's types: %v", name, err)
		}
		out, _ := json.Marshal(v)
		return out
	}
	routes := map[string][]byte{
		"/jobs/j19aa5e7c2a1f3b9d0e4c7": load("status_running.json", &control.JobStatus{}),
		"/jobs/j19aa5e7c2a1f3b9d0e4c8": load("status_failed.json", &control.JobStatus{}),
		"/jobs":                        load("list.json", &control.JobList{}),
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get(client.OwnerHeader) != "alice" {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"code":"unauthenticated","message":"no caller identity","field":""}`)
			return
		}
		body, ok := routes[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"code":"not_found","message":"no such job","field":"id"}`)
			return
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testEnv(endpoint string) (cli.Env, *bytes.Buffer, *bytes.Buffer) {
	var stdout, stderr bytes.Buffer
	vars := map[string]string{"BATCHWORK_ENDPOINT": endpoint, "BATCHWORK_OWNER": "alice"}
	return cli.Env{
		Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr,
		Getenv: func(k string) string { return vars[k] },
		Now:    func() time.Time { return time.Date(2026, 11, 21, 10, 0, 4, 0, time.UTC) },
		Loc:    time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	}, &stdout, &stderr
}

// Golden output of the commands people read most: status, list and
// validate, for people and for scripts. Run with -update to rewrite.
func TestGolden(t *testing.T) {
	srv := fixtureAPI(t)
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"status", []string{"status", "j19aa5e7c2a1f3b9d0e4c7"}, cli.ExitOK},
		{"status_failed", []string{"status", "j19aa5e7c2a1f3b9d0e4c8"}, cli.ExitOK},
		{"status_json", []string{"status", "j19aa5e7c2a1f3b9d0e4c7", "-o", "json"}, cli.ExitOK},
		{"status_not_found", []string{"status", "j19aa5e7c2a1f3b9d0e4c0"}, cli.ExitNotFound},
		{"list", []string{"list"}, cli.ExitOK},
		{"list_json", []string{"--output", "json", "list"}, cli.ExitOK},
		{"validate", []string{"validate", "testdata/valid.yaml"}, cli.ExitOK},
		{"validate_errors", []string{"validate", "testdata/invalid.yaml"}, cli.ExitInvalid},
		{"validate_errors_json", []string{"validate", "-o", "json", "testdata/invalid.yaml"}, cli.ExitInvalid},
		{"validate_unknown_field", []string{"validate", "testdata/unknown_field.yaml"}, cli.ExitInvalid},
		{"usage_error", []string{"status"}, cli.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, stdout, stderr := testEnv(srv.URL)
			code := cli.Main(context.Background(), tc.args, env)
			got := fmt.Sprintf("$ batchwork %s\n%s--- stderr\n%s--- exit %d\n", strings.Join(tc.args, " "), stdout, stderr, code)
			golden := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("output differs from %s (-want +got):\n%s", golden, diff)
			}
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
		})
	}
}

// Every command has --help with examples, and it exits 0.
func TestHelpHasExamples(t *testing.T) {
	for _, name := range []string{"submit", "status", "watch", "list", "tasks", "history", "cancel", "result", "validate"} {
		env, stdout, _ := testEnv("http://127.0.0.1:1")
		if code := cli.Main(context.Background(), []string{name, "--help"}, env); code != cli.ExitOK {
			t.Errorf("%s --help: exit %d", name, code)
		}
		out := stdout.String()
		i := strings.Index(out, "\nExamples:\n")
		if i < 0 || !strings.Contains(out[i:], "batchwork "+name) || !strings.HasPrefix(out, "Usage: batchwork "+name) {
			t.Errorf("%s --help has no usage or examples:\n%s", name, out)
		}
	}
	env, stdout, _ := testEnv("")
	if code := cli.Main(context.Background(), []string{"help"}, env); code != cli.ExitOK || !strings.Contains(stdout.String(), "Exit codes:") {
		t.Errorf("help: exit %d:\n%s", code, stdout)
	}
}

// Non-terminal output has no escape sequences (no colour, no bar), even
// for watch.
func TestNoEscapesWithoutTTY(t *testing.T) {
	srv := fixtureAPI(t)
	for _, args := range [][]string{{"status", "j19aa5e7c2a1f3b9d0e4c7"}, {"list"}, {"watch", "j19aa5e7c2a1f3b9d0e4c8"}} {
		env, stdout, _ := testEnv(srv.URL)
		cli.Main(context.Background(), args, env)
		if strings.Contains(stdout.String(), "\x1b") || strings.Contains(stdout.String(), "█") {
			t.Errorf("%v wrote terminal escapes or a bar to a non-terminal:\n%q", args, stdout)
		}
	}
	// And a terminal gets them, unless NO_COLOR.
	env, stdout, _ := testEnv(srv.URL)
	env.TTY = true
	if code := cli.Main(context.Background(), []string{"watch", "j19aa5e7c2a1f3b9d0e4c8"}, env); code != cli.ExitFailed {
		t.Errorf("watch of a failed job: exit %d, want %d", code, cli.ExitFailed)
	}
	if !strings.Contains(stdout.String(), "\x1b[31mFAILED") || !strings.Contains(stdout.String(), "█") {
		t.Errorf("terminal watch: no colour or bar:\n%q", stdout)
	}
}
