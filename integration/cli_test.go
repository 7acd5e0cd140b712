package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/examples/diamond"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/localauth"
)

// syncBuffer is a buffer the CLI writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// cliRun runs the batchwork command against the test's runner as owner,
// with stdout not a terminal.
func (e *env) cliRun(ctx context.Context, owner string, stdout, stderr *syncBuffer, args ...string) int {
	vars := map[string]string{"BATCHWORK_ENDPOINT": e.r.URL, "BATCHWORK_OWNER": owner, localauth.TokenEnv: e.r.Token}
	maps.Copy(vars, e.cliVars)
	return cli.Main(ctx, args, cli.Env{
		Stdin: strings.NewReader(""), Stdout: stdout, Stderr: stderr,
		Getenv: func(k string) string { return vars[k] },
		Now:    time.Now, Loc: time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(d):
				return nil
			}
		},
	})
}

// watch follows a real job on the local runner to its end: it shows the
// job running, then its progress, and exits 0 when it succeeds; the job's
// outputs then come back through result.
func TestCLIWatchFollowsJob(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	release := make(chan struct{})
	diamond.Register(reg, func(ctx context.Context, tk *batchwork.Task) error {
		if tk.Stage == "a" {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	specFile := filepath.Join(dir, "diamond.yaml")
	if err := os.WriteFile(specFile, diamond.Spec("watched", 2), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut syncBuffer
	if code := e.cliRun(ctx, "tester", &out, &errOut, "submit", specFile, "-o", "json"); code != cli.ExitOK {
		t.Fatalf("submit: exit %d: %s", code, errOut.String())
	}
	var sub control.SubmitResult
	if err := json.Unmarshal([]byte(out.String()), &sub); err != nil || !sub.Created {
		t.Fatalf("submit output %q: %v", out.String(), err)
	}

	var wOut, wErr syncBuffer
	code := make(chan int, 1)
	go func() { code <- e.cliRun(ctx, "tester", &wOut, &wErr, "watch", sub.JobID, "--interval", "100ms") }()
	waitFor(t, time.Minute, "watch to show the job running", func() bool {
		return strings.Contains(wOut.String(), "RUNNING 0/2 tasks | a RUNNING 0/2")
	})
	close(release)
	select {
	case c := <-code:
		if c != cli.ExitOK {
			t.Fatalf("watch: exit %d\n%s\n%s", c, wOut.String(), wErr.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("watch did not end:\n%s", wOut.String())
	}
	lines := strings.Split(strings.TrimSpace(wOut.String()), "\n")
	if len(lines) < 3 || !strings.Contains(wOut.String(), "SUCCEEDED 8/8 tasks") ||
		!strings.HasPrefix(lines[len(lines)-2], "Job "+sub.JobID+" SUCCEEDED in ") {
		t.Fatalf("watch output:\n%s", wOut.String())
	}
	if strings.Contains(wOut.String(), "\x1b") {
		t.Fatalf("watch wrote terminal escapes to a non-terminal:\n%q", wOut.String())
	}

	var rOut, rErr syncBuffer
	if code := e.cliRun(ctx, "tester", &rOut, &rErr, "result", sub.JobID); code != cli.ExitOK {
		t.Fatalf("result: exit %d: %s", code, rErr.String())
	}
	if rOut.String() != "d/0 attempt 1 params map[]\nd/1 attempt 1 params map[]\n" {
		t.Fatalf("result printed %q", rOut.String())
	}
	var other, otherErr syncBuffer
	if code := e.cliRun(ctx, "mallory", &other, &otherErr, "result", sub.JobID); code != cli.ExitNotFound {
		t.Fatalf("another owner's result: exit %d, want %d", code, cli.ExitNotFound)
	}
}

// watch and submit --wait exit non-zero when the job fails or is
// cancelled, so scripts and CI notice.
func TestCLIExitCodesOfEndedJobs(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("boom", func(ctx context.Context, tk *batchwork.Task) error { return errors.New("disk on fire") })
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	failing := write("fail.json", `{"name":"fails","retry":{"maxAttempts":1},"stages":[{"name":"s","task":"boom","partitions":{"count":1}}]}`)
	var out, errOut syncBuffer
	if code := e.cliRun(ctx, "tester", &out, &errOut, "submit", "--wait", failing, "--interval", "100ms"); code != cli.ExitFailed {
		t.Fatalf("submit --wait of a failing job: exit %d, want %d\n%s%s", code, cli.ExitFailed, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "disk on fire") {
		t.Fatalf("the failure's error is not shown:\n%s", out.String())
	}

	hanging := write("hang.yaml", "name: hangs\nlease: 3s\nstages:\n  - {name: s, task: hang, partitions: {count: 2}}\n")
	var wOut, wErr syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- e.cliRun(ctx, "tester", &wOut, &wErr, "submit", hanging, "--wait", "--interval", "100ms")
	}()
	var id string
	waitFor(t, time.Minute, "the job to be submitted", func() bool {
		_, after, ok := strings.Cut(wOut.String(), "Submitted job ")
		id, _, _ = strings.Cut(after, "\n")
		return ok && strings.Contains(wOut.String(), "RUNNING")
	})
	var cOut, cErr syncBuffer
	if c := e.cliRun(ctx, "tester", &cOut, &cErr, "cancel", id); c != cli.ExitOK || !strings.Contains(cOut.String(), "CANCELLED") {
		t.Fatalf("cancel: exit %d: %s%s", c, cOut.String(), cErr.String())
	}
	select {
	case c := <-code:
		if c != cli.ExitCancelled {
			t.Fatalf("submit --wait of a cancelled job: exit %d, want %d\n%s", c, cli.ExitCancelled, wOut.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("submit --wait did not end after the cancel")
	}
	var again, againErr syncBuffer
	if c := e.cliRun(ctx, "tester", &again, &againErr, "watch", id); c != cli.ExitCancelled {
		t.Fatalf("watch of a cancelled job: exit %d", c)
	}
	// Cancelling a job that failed is a conflict.
	var list, listErr syncBuffer
	if c := e.cliRun(ctx, "tester", &list, &listErr, "list", "--status", "FAILED", "-o", "json"); c != cli.ExitOK {
		t.Fatalf("list: exit %d %s", c, listErr.String())
	}
	var jl control.JobList
	if err := json.Unmarshal([]byte(list.String()), &jl); err != nil || len(jl.Jobs) != 1 {
		t.Fatalf("failed jobs %q: %v", list.String(), err)
	}
	var x, xErr syncBuffer
	if c := e.cliRun(ctx, "tester", &x, &xErr, "cancel", jl.Jobs[0].ID); c != cli.ExitConflict || !strings.Contains(xErr.String(), "already FAILED") {
		t.Fatalf("cancel a failed job: exit %d: %s", c, xErr.String())
	}
}
