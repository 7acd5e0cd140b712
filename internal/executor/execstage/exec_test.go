//go:build unix

package execstage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/spec"
)

// errLeaseLost stands in for the runner's cancel cause of a lost lease.
var errLeaseLost = errors.New("lease lost")

// Programs lists what a host publishes as the programs it runs: the
// executable regular files of its programs directory (links followed)
// whose names an exec stage can hold, sorted; nothing without a directory.
func TestPrograms(t *testing.T) {
	t.Parallel()
	dir := testdouble.Programs(t, map[string]string{"wordcount.py": "", "b.sh": "", "bad name": ""})
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not a program"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "b.sh"), filepath.Join(dir, "link.sh")); err != nil {
		t.Fatal(err)
	}
	got, err := Programs(dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"b.sh", "link.sh", "wordcount.py"}; !slices.Equal(got, want) {
		t.Errorf("Programs = %v, want %v", got, want)
	}
	if got, err := Programs(""); got != nil || err != nil {
		t.Errorf("Programs(\"\") = %v, %v; want none", got, err)
	}
}

// TestExecStdin: the task's input is the program's stdin.
func TestExecStdin(t *testing.T) {
	t.Parallel()
	dir := testdouble.Programs(t, map[string]string{"upper": "tr a-z A-Z"})
	prog, err := New(dir, mustSpec(t, strings.Replace(execOne, "[prog, arg one]", "[upper]", 1)).Stages[0], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out := &memOut{}
	task := &Attempt{Input: strings.NewReader("one\ntwo\n"), Out: out, Log: discard()}
	if err := prog.Run(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	if got := string(out.part()); got != "ONE\nTWO\n" {
		t.Errorf("output %q, want the input upper-cased", got)
	}
}

// TestExecStderrToLog: stderr lines reach the task log one record a line,
// each line and the number of lines bounded.
func TestExecStderrToLog(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxStderrLine+100)
	tests := []struct {
		name        string
		script      string
		wantLines   []string // the first lines logged
		wantLogged  int
		wantDropped string // lines_not_logged of the truncation record; "": none
	}{
		{"line by line", "echo one >&2; printf 'two\\nthree' >&2", []string{"one", "two", "three"}, 3, ""},
		{"a long line is cut", "printf '" + long + "\\nafter\\n' >&2", []string{long[:maxStderrLine], "after"}, 2, ""},
		{"bounded", fmt.Sprintf("i=0; while [ $i -lt %d ]; do echo line $i >&2; i=$((i+1)); done", maxStderrLines+5),
			[]string{"line 0", "line 1"}, maxStderrLines, "5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := testdouble.Programs(t, map[string]string{"prog": tt.script})
			prog, err := New(dir, mustSpec(t, execOne).Stages[0], Limits{})
			if err != nil {
				t.Fatal(err)
			}
			h := &logRecords{}
			task := &Attempt{Out: &memOut{}, Log: slog.New(h)}
			if err := prog.Run(context.Background(), task); err != nil {
				t.Fatal(err)
			}
			var lines []string
			dropped := ""
			for _, r := range h.recs {
				switch r.Message {
				case "stderr":
					lines = append(lines, attr(r, "line"))
				case "stderr truncated":
					dropped = attr(r, "lines_not_logged")
				}
			}
			if len(lines) != tt.wantLogged {
				t.Errorf("%d stderr lines logged, want %d", len(lines), tt.wantLogged)
			}
			for i, w := range tt.wantLines {
				if i >= len(lines) || lines[i] != w {
					t.Errorf("line %d logged = %.40q..., want %.40q...", i, lines[min(i, len(lines)-1)], w)
				}
			}
			if dropped != tt.wantDropped {
				t.Errorf("lines not logged = %q, want %q", dropped, tt.wantDropped)
			}
		})
	}
}

// TestExecCancelKillsProcessGroup: cancelling the task's context (a lost
// lease, an ended job) kills the program and what it started. The
// program and its background child hold a FIFO open; the FIFO reaches
// end of file only once both are gone.
func TestExecCancelKillsProcessGroup(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	dir := testdouble.Programs(t, map[string]string{"prog": `exec 3>"` + fifo + `"
sleep 1000 &
echo ready >&3
wait`})
	prog, err := New(dir, mustSpec(t, execOne).Stages[0], Limits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- prog.Run(ctx, &Attempt{Out: &memOut{}, Log: discard()})
	}()
	// Opening for reading waits for the program to open the FIFO.
	f, err := os.Open(fifo)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil || line != "ready\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	cancel(errLeaseLost)
	err = within(t, done, 10*time.Second, "the task to return after cancellation")
	if !errors.Is(err, errLeaseLost) {
		t.Errorf("task error %v, want the cancellation's cause", err)
	}
	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, f)
		eof <- err
	}()
	if err := within(t, eof, 10*time.Second, "every process of the group to exit (the FIFO's end of file)"); err != nil {
		t.Errorf("read to end: %v", err)
	}
}

func TestExecDirFromEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o644)
	tests := []struct {
		name, dir, lambda string
		want, wantErr     string
	}{
		{"unset", "", "", "", ""},
		{"set", dir, "", dir, ""},
		{"never on Lambda", dir, "127.0.0.1:9001", "", ""},
		{"relative", "bin", "", "", "want an absolute path"},
		{"missing", filepath.Join(dir, "nope"), "", "", "no such file"},
		{"a file", file, "", "", "not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvExecDir, tt.dir)
			t.Setenv("AWS_LAMBDA_RUNTIME_API", tt.lambda)
			got, err := ExecDirFromEnv()
			if got != tt.want || (err == nil) != (tt.wantErr == "") || err != nil && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ExecDirFromEnv() = %q, %v; want %q, error containing %q", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

// TestNewRefuses: only an executable file of the programs directory,
// named by a bare name, runs; a stored spec that slipped past validation
// cannot reach outside the directory.
func TestNewRefuses(t *testing.T) {
	t.Parallel()
	dir := testdouble.Programs(t, map[string]string{"ok": "true"})
	os.WriteFile(filepath.Join(dir, "plain"), []byte("#!/bin/sh\n"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	tests := []struct {
		argv []string
		want string
	}{
		{[]string{"../ok"}, `exec: "../ok" is not a program name`},
		{[]string{"/bin/sh", "-c", "id"}, `exec: "/bin/sh" is not a program name`},
		{[]string{".."}, `exec: ".." is not a program name`},
		{[]string{}, "exec: want a program and its arguments"},
		{[]string{"plain"}, `exec: "plain" in this executor's programs directory is not an executable file`},
		{[]string{"sub"}, `exec: "sub" in this executor's programs directory is not an executable file`},
		{[]string{"sh"}, `exec: program "sh" is not installed in this executor's programs directory`},
		{[]string{"ok"}, ""},
	}
	for _, tt := range tests {
		_, err := New(dir, spec.Stage{Name: "s", Exec: tt.argv}, Limits{})
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("New(%q) = %v, want %q", tt.argv, err, tt.want)
		}
	}
}
