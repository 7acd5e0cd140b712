//go:build unix

package executor

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/spec"
)

// programs writes executable shell scripts into a fresh programs
// directory and returns it.
func programs(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const execOne = `
name: j
stages:
  - name: s
    exec: [prog, arg one]
    partitions:
      count: 1
      params: [{shard-id: "7"}]
`

const execShuffle = `
name: j
stages:
  - name: m
    exec: [prog]
    partitions: {count: 1}
    shuffle: {partitions: 3}
  - name: r
    task: t
    after: [m]
`

// TestExecTask runs exec stages end to end through the runner: outputs
// published and committed, or the attempt failed with a cause that says
// why.
func TestExecTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		spec   string
		script string // the body of "prog"; none: not installed
		noDir  bool   // the host has no programs directory
		// want is partition -> contents of a committed attempt; failWith,
		// the substrings of a failed attempt's cause.
		want     map[int]string
		failWith []string
	}{
		{
			name: "plain lines to partition 0, with identity, params and arguments",
			spec: execOne,
			script: `echo "$BATCHWORK_JOB $BATCHWORK_STAGE $BATCHWORK_PARTITION $BATCHWORK_ATTEMPT $BATCHWORK_PARTS $BATCHWORK_FORMAT"
echo "$BATCHWORK_PARAM_SHARD_ID $BATCHWORK_PARAMS"
echo "$1"
echo "$#"`,
			want: map[int]string{0: "j1 s 0 1 1 lines\n" + `7 {"shard-id":"7"}` + "\narg one\n1\n"},
		},
		{
			name:   "plain output kept byte for byte",
			spec:   execOne,
			script: `printf 'no newline at the end'`,
			want:   map[int]string{0: "no newline at the end"},
		},
		{
			name:   "runs in a fresh working directory that is its TMPDIR",
			spec:   execOne,
			script: `[ "$(pwd)" = "$TMPDIR" ] && [ -z "$(ls -A)" ] && echo clean`,
			want:   map[int]string{0: "clean\n"},
		},
		{
			name: "shuffle lines routed by key like Emit",
			spec: execShuffle,
			// The last line has no newline; a value may hold tabs.
			script: `printf 'apple\t1\nbanana\t2\ncherry\tx\ty\ndate\t4'`,
			want: func() map[int]string {
				m := map[int]string{0: "", 1: "", 2: ""}
				for _, kv := range [][2]string{{"apple", "1"}, {"banana", "2"}, {"cherry", "x\ty"}, {"date", "4"}} {
					m[PartitionOf(kv[0], 3)] += kv[0] + "\t" + kv[1] + "\n"
				}
				return m
			}(),
		},
		{
			name:     "shuffle line without a tab",
			spec:     execShuffle,
			script:   "printf 'a\\t1\\nnotab\\nb\\t2\\n'",
			failWith: []string{"exec prog: stdout line 2 has no tab", `"notab"`},
		},
		{
			name:     "non-zero exit",
			spec:     execOne,
			script:   "echo working\necho first >&2\necho 'oops: bad input' >&2\nexit 3",
			failWith: []string{"exec prog: exit code 3", "last stderr lines:\nfirst\noops: bad input"},
		},
		{
			name:     "killed by a signal",
			spec:     execOne,
			script:   "kill -9 $$",
			failWith: []string{"exec prog: signal: killed", "no stderr"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			scripts := map[string]string{}
			if tt.script != "" {
				scripts["prog"] = tt.script
			}
			dir := programs(t, scripts)
			if tt.noDir {
				dir = ""
			}
			cp := &fakeCP{spec: mustSpec(t, tt.spec), lease: time.Minute}
			b := &memBlob{}
			r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
			res := r.Handle(context.Background(), Delivery{Body: "j1/0/0"}, nil)
			_, commits, fails := cp.snapshot()
			if tt.failWith != nil {
				if len(fails) != 1 || len(commits) != 0 {
					t.Fatalf("commits %v, fails %v; want one failure (result %+v)", commits, fails, res)
				}
				for _, s := range tt.failWith {
					if !strings.Contains(cp.causes[0], s) {
						t.Errorf("cause %q does not contain %q", cp.causes[0], s)
					}
				}
				return
			}
			if len(commits) != 1 {
				t.Fatalf("commits %v, fails %v (%v); want one commit", commits, fails, cp.causes)
			}
			stage := cp.spec.Stages[0].Name
			got := committedParts(t, b, stage, len(tt.want))
			for p, want := range tt.want {
				if got[p] != want {
					t.Errorf("part %d = %q, want %q", p, got[p], want)
				}
			}
		})
	}
}

// A host that cannot run an exec stage's program hands the task's message
// back unclaimed, spending no attempt, for an executor that can: the
// construct's ExecutorBoth runs the Lambda executor (never a programs
// directory) on the same queues as the Fargate one, so a claim and a
// failure there would fail a valid job whenever the Lambda executor won
// maxAttempts claims of one task. The stage is read before the claim
// from the control plane's cached spec (Specs). A control plane that
// cannot serve it leaves the host to claim, and the attempt fails saying
// why, as before.
func TestExecStageHandedBackByHostThatCannotRunIt(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		scripts map[string]string
		noDir   bool // the host has no programs directory (the Lambda executor)
		noSpecs bool // the control plane serves no spec before the claim
		want    string
	}{
		{name: "host without programs", noDir: true, want: "exec stages run on the Fargate or local executor"},
		{name: "program not installed", scripts: map[string]string{"other": "echo hi"},
			want: `exec: program "prog" is not installed in this executor's programs directory`},
		{name: "program not executable", scripts: map[string]string{"prog": "echo hi"},
			want: `exec: "prog" in this executor's programs directory is not an executable file`},
		{name: "no spec before the claim: claimed and failed", noDir: true, noSpecs: true,
			want: "exec stages run on the Fargate or local executor"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := programs(t, tt.scripts)
			if tt.name == "program not executable" {
				if err := os.Chmod(filepath.Join(dir, "prog"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if tt.noDir {
				dir = ""
			}
			fake := &fakeCP{spec: mustSpec(t, execOne), lease: time.Minute}
			var cp ControlPlane = fake
			if tt.noSpecs {
				cp = noSpecsCP{fake}
			}
			r := &Runner{CP: cp, Blob: &memBlob{}, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
			res := r.Handle(context.Background(), Delivery{Body: "j1/0/0"}, nil)
			claims, _, fails := fake.snapshot()
			if tt.noSpecs {
				if len(claims) != 1 || len(fails) != 1 || !strings.Contains(fake.causes[0], tt.want) {
					t.Fatalf("claims %v, fails %v (%q); want the attempt claimed and failed with %q", claims, fails, fake.causes, tt.want)
				}
				return
			}
			if len(claims) != 0 || len(fails) != 0 {
				t.Fatalf("a host that cannot run the program claimed %d and failed %d attempt(s) (%v; result %+v)",
					len(claims), len(fails), fake.causes, res)
			}
			if res.Action != Hide || res.Delay != handBackDelay || res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) {
				t.Errorf("result %+v; want the message hidden for %v with %q", res, handBackDelay, tt.want)
			}
		})
	}
}

// noSpecsCP is fakeCP serving no spec before a claim.
type noSpecsCP struct{ *fakeCP }

func (noSpecsCP) JobSpec(context.Context, string) (*spec.Job, error) {
	return nil, unsupported("job specs before a claim")
}

// Programs lists what a host publishes as the programs it runs: the
// executable regular files of its programs directory (links followed)
// whose names an exec stage can hold, sorted; nothing without a directory.
func TestPrograms(t *testing.T) {
	t.Parallel()
	dir := programs(t, map[string]string{"wordcount.py": "", "b.sh": "", "bad name": ""})
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

// TestExecEnvironment: the program gets the task's variables and a few of
// the host's, never the host's AWS settings or other secrets.
func TestExecEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")
	t.Setenv("BATCHWORK_TABLE", "table")
	t.Setenv("LANG", "C.UTF-8")
	dir := programs(t, map[string]string{"prog": "env | cut -d= -f1 | sort"})
	cp := &fakeCP{spec: mustSpec(t, execOne), lease: time.Minute}
	b := &memBlob{}
	r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
	r.Handle(context.Background(), Delivery{Body: "j1/0/0"}, nil)
	got, err := b.Get(context.Background(), blob.OutputKey("j1", "s", 0, 1, 0))
	if err != nil {
		t.Fatalf("output: %v (causes %v)", err, cp.causes)
	}
	allowed := map[string]bool{"PATH": true, "HOME": true, "LANG": true, "LC_ALL": true, "TZ": true, "TMPDIR": true, "PWD": true, "SHLVL": true, "_": true, "OLDPWD": true}
	var names []string
	for _, n := range strings.Fields(string(got)) {
		names = append(names, n)
		if !allowed[n] && !strings.HasPrefix(n, "BATCHWORK_") || n == "BATCHWORK_TABLE" {
			t.Errorf("the program sees %s", n)
		}
	}
	for _, n := range []string{"LANG", "TMPDIR", EnvTaskJob, EnvTaskStage, EnvTaskPartition, EnvTaskAttempt, EnvTaskParams, EnvTaskParamPrefix + "SHARD_ID"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+n+" ") {
			t.Errorf("the program does not see %s (it sees %v)", n, names)
		}
	}
}

// TestExecHomeIsWorkingDirectory: what the trimmed environment does
// guarantee (exec.go: it avoids accidents; it is no boundary). HOME is the
// attempt's working directory, so an AWS SDK in the program finds no
// ~/.aws of the executor's user, and none of the executor's AWS_*
// variables are in the program's own environment.
func TestExecHomeIsWorkingDirectory(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".aws", "credentials"), []byte("[default]\naws_secret_access_key = host\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", home)
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAHOST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "host")
	t.Setenv("AWS_SESSION_TOKEN", "host")
	t.Setenv("AWS_PROFILE", "host")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")
	dir := programs(t, map[string]string{"prog": `[ "$HOME" = "$(pwd)" ] && [ "$HOME" = "$TMPDIR" ] && echo "home is the working directory"
[ -e "$HOME/.aws/credentials" ] && echo "host credentials found through HOME"
env | cut -d= -f1 | grep '^AWS_' | sort`})
	cp := &fakeCP{spec: mustSpec(t, execOne), lease: time.Minute}
	b := &memBlob{}
	r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
	r.Handle(context.Background(), Delivery{Body: "j1/0/0"}, nil)
	got, err := b.Get(context.Background(), blob.OutputKey("j1", "s", 0, 1, 0))
	if err != nil {
		t.Fatalf("output: %v (causes %v)", err, cp.causes)
	}
	if want := "home is the working directory\n"; string(got) != want {
		t.Errorf("the program printed %q, want %q (HOME the attempt's working directory, no AWS_* variables)", got, want)
	}
}

// TestExecStdin: the task's input is the program's stdin.
func TestExecStdin(t *testing.T) {
	t.Parallel()
	dir := programs(t, map[string]string{"upper": "tr a-z A-Z"})
	fn, err := (&Runner{ExecDir: dir}).execFunc(mustSpec(t, strings.Replace(execOne, "[prog, arg one]", "[upper]", 1)).Stages[0], execLimits{})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	task := &Task{Input: strings.NewReader("one\ntwo\n"), Out: (&Runner{}).newOutput(1), Log: discard()}
	if err := fn(context.Background(), task); err != nil {
		t.Fatal(err)
	}
	task.Out.mu.Lock()
	for _, p := range task.Out.parts {
		got.Write(p.buf)
	}
	task.Out.mu.Unlock()
	if got.String() != "ONE\nTWO\n" {
		t.Errorf("output %q, want the input upper-cased", got.String())
	}
}

// logRecords is a slog handler that keeps every record.
type logRecords struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (h *logRecords) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *logRecords) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecords) WithGroup(string) slog.Handler      { return h }

func attr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
			return false
		}
		return true
	})
	return v
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
			dir := programs(t, map[string]string{"prog": tt.script})
			fn, err := (&Runner{ExecDir: dir}).execFunc(mustSpec(t, execOne).Stages[0], execLimits{})
			if err != nil {
				t.Fatal(err)
			}
			h := &logRecords{}
			task := &Task{Out: (&Runner{}).newOutput(1), Log: slog.New(h)}
			if err := fn(context.Background(), task); err != nil {
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
	dir := programs(t, map[string]string{"prog": `exec 3>"` + fifo + `"
sleep 1000 &
echo ready >&3
wait`})
	fn, err := (&Runner{ExecDir: dir}).execFunc(mustSpec(t, execOne).Stages[0], execLimits{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- fn(ctx, &Task{Out: (&Runner{}).newOutput(1), Log: discard()})
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

// TestExecFuncRefuses: only an executable file of the programs directory,
// named by a bare name, runs; a stored spec that slipped past validation
// cannot reach outside the directory.
func TestExecFuncRefuses(t *testing.T) {
	t.Parallel()
	dir := programs(t, map[string]string{"ok": "true"})
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
		_, err := (&Runner{ExecDir: dir}).execFunc(spec.Stage{Name: "s", Exec: tt.argv}, execLimits{})
		if got := fmt.Sprint(err); tt.want == "" && err != nil || tt.want != "" && got != tt.want {
			t.Errorf("execFunc(%q) = %v, want %q", tt.argv, err, tt.want)
		}
	}
}
