package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// A rejection's reason is the task's text (a program's stderr line, a
// message built from the record): one holding line ends, tabs or terminal
// control sequences must neither break the table's lines nor reach the
// terminal raw, as the record itself never does (it is quoted).
func TestBadRecordReasonStaysOnItsLine(t *testing.T) {
	t.Parallel()
	const job = "j0123456789a0123456789"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(control.BadRecordPage{Job: job, Counts: map[string]int64{"s": 1}, Records: []domain.BadRecord{
			{Stage: "s", Partition: 0, Attempt: 1, Offset: 7, Record: "x", Reason: "line one\nline two\tcol\x1b[2Jwiped\r"},
		}})
	}))
	defer srv.Close()
	var out, errOut bytes.Buffer
	vars := map[string]string{"BATCHWORK_ENDPOINT": srv.URL, "BATCHWORK_OWNER": "alice"}
	code := Main(context.Background(), []string{"result", job, "--bad-records"}, Env{
		Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut, Getenv: func(k string) string { return vars[k] },
		Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if code != ExitOK {
		t.Fatalf("exit %d; stderr %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	if len(lines) != 2 || strings.ContainsAny(out.String(), "\x1b\r") {
		t.Fatalf("bad-record listing of one record is %d lines (control bytes: %v):\n%q", len(lines), strings.ContainsAny(out.String(), "\x1b\r"), out.String())
	}
	if !strings.Contains(lines[1], "line one line two col") {
		t.Fatalf("reason not kept readable on its line: %q", lines[1])
	}
}
