package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/internal/gobuild"
)

// make demo SERVE=1 is where the CLI's help sends newcomers: there,
// `batchwork logs` reads the demo's log file, and Ctrl-C (SIGINT; SIGTERM
// likewise) stops the demo cleanly, with exit status 0, after it shut its
// runner and emulator down.
func TestDemoServeLogsAndInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the demo and runs it on the emulator")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "demo")
	if err := gobuild.Build("", ".", bin, "", ""); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, bin, "-serve", "-listen", "127.0.0.1:0", "-size", "65536", "-slots", "2",
		"-log", filepath.Join(dir, "demo.log"))
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+dir)
	// Its own process group, as a terminal's foreground job: Ctrl-C
	// signals the whole group, the emulator's servers included.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var out strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()
	// Read until the demo serves: its job's id and the API's address.
	var job, api string
	for api == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("the demo ended before serving:\n%s\nstderr:\n%s", out.String(), stderr.String())
			}
			out.WriteString(l + "\n")
			if m := regexp.MustCompile(`^==> submitted job (\S+)`).FindStringSubmatch(l); m != nil {
				job = m[1]
			}
			if m := regexp.MustCompile(`until Ctrl-C: API (\S+),`).FindStringSubmatch(l); m != nil {
				api = m[1]
			}
		case <-ctx.Done():
			t.Fatalf("the demo did not serve in time:\n%s", out.String())
		}
	}
	go func() { // the rest of its output, so it never blocks writing
		for l := range lines {
			out.WriteString(l + "\n")
		}
	}()

	var logOut, logErr bytes.Buffer
	vars := map[string]string{"BATCHWORK_ENDPOINT": api, "BATCHWORK_OWNER": "demo", "XDG_CONFIG_HOME": dir}
	code := cli.Main(ctx, []string{"logs", job}, cli.Env{
		Stdin: strings.NewReader(""), Stdout: &logOut, Stderr: &logErr, Getenv: func(k string) string { return vars[k] },
		Now: time.Now, Loc: time.UTC, HTTP: &http.Client{},
		Sleep: func(ctx context.Context, d time.Duration) error { return ctx.Err() },
	})
	if code != cli.ExitOK || !strings.Contains(logOut.String(), "job submitted") {
		t.Errorf("batchwork logs %s: exit %d\nstdout:\n%s\nstderr:\n%s", job, code, logOut.String(), logErr.String())
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("after SIGINT the demo exited: %v\nstderr:\n%s", err, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("the demo did not stop after SIGINT")
	}
}
