package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// outputsAPI answers the manifest route with one output of the given
// stage name, whose presigned URL is served by the same server; it stands
// for a malicious or compromised endpoint choosing the names.
func outputsAPI(t *testing.T, stage string) *httptest.Server {
	t.Helper()
	return formatOutputsAPI(t, stage, "")
}

// formatOutputsAPI is outputsAPI of outputs of the given format.
func formatOutputsAPI(t *testing.T, stage, format string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/object":
			fmt.Fprint(w, "payload\n")
		case strings.HasSuffix(r.URL.Path, "/manifest"):
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(control.OutputList{
				Job: "j19aa5e7c2a1f3b9d0e4c7", State: "SUCCEEDED", Complete: true, Bucket: "b",
				Outputs: []control.OutputInfo{{
					Output: domain.Output{Stage: stage, Partition: 0, Attempt: 1, Part: 0, Key: "jobs/j/out/x"},
					URL:    srv.URL + "/object",
					Format: format,
				}},
			})
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// result --download builds file names from the stage names in the
// server's answer: any name that is not a stage name (the spec's rule)
// is refused before anything is written, so a server cannot make the CLI
// write outside the download directory.
func TestResultDownloadRefusesServerPaths(t *testing.T) {
	cases := []struct {
		name, stage string
		ok          bool
	}{
		{"a stage name", "map", true},
		{"parent directory", "../x", false},
		{"parent itself", "..", false},
		{"current directory", ".", false},
		{"absolute path", "/tmp/x", false},
		{"nested path", "a/b", false},
		{"backslash", `a\b`, false},
		{"empty", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := outputsAPI(t, tc.stage)
			root := t.TempDir()
			dir := filepath.Join(root, "out")
			env, stdout, stderr := testEnv(srv.URL)
			code := cli.Main(context.Background(), []string{"result", "j19aa5e7c2a1f3b9d0e4c7", "--download", dir}, env)
			var written []string
			_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() {
					written = append(written, p)
				}
				return nil
			})
			if tc.ok {
				want := filepath.Join(dir, tc.stage, "p000000-part-00000")
				if code != cli.ExitOK || len(written) != 1 || written[0] != want {
					t.Fatalf("exit %d, wrote %v, want exit 0 and %s; stderr:\n%s", code, written, want, stderr)
				}
				return
			}
			if code != cli.ExitError {
				t.Errorf("exit %d, want %d; stdout:\n%s", code, cli.ExitError, stdout)
			}
			if len(written) != 0 {
				t.Errorf("wrote %v for stage %q, want nothing", written, tc.stage)
			}
			if want := fmt.Sprintf("stage %q", tc.stage); !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "refusing") {
				t.Errorf("stderr %q, want a refusal naming %s", stderr, want)
			}
		})
	}
}

// A Parquet stage's outputs are downloaded with the extension of their
// published names, so tools open them as Parquet; other outputs have none.
func TestResultDownloadNamesParquetFiles(t *testing.T) {
	for _, tc := range []struct{ format, want string }{
		{"", "p000000-part-00000"},
		{"parquet", "p000000-part-00000.parquet"},
	} {
		srv := formatOutputsAPI(t, "rows", tc.format)
		dir := t.TempDir()
		env, _, stderr := testEnv(srv.URL)
		if code := cli.Main(context.Background(), []string{"result", "j19aa5e7c2a1f3b9d0e4c7", "--download", dir}, env); code != cli.ExitOK {
			t.Fatalf("format %q: exit %d; stderr:\n%s", tc.format, code, stderr)
		}
		if _, err := os.Stat(filepath.Join(dir, "rows", tc.want)); err != nil {
			t.Errorf("format %q: %v; want the output saved as rows/%s", tc.format, err, tc.want)
		}
	}
}
