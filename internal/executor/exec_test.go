//go:build unix

package executor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/output"
	"github.com/batchwork/batchwork/internal/testdouble"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/spec"
)

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
			name: "run parameters, apart from the partition's",
			spec: `{"name": "j", "params": {"date": "2026-03-01", "SHARD_ID": "run"}, "stages": [{"name": "s", "exec": ["prog"],` +
				`"partitions": {"count": 1, "params": [{"shard-id": "7"}]}}]}`,
			script: `echo "$BATCHWORK_RUN_PARAM_date $BATCHWORK_RUN_PARAM_SHARD_ID $BATCHWORK_PARAM_SHARD_ID"
echo "$BATCHWORK_RUN_PARAMS"`,
			want: map[int]string{0: "2026-03-01 run 7\n" + `{"SHARD_ID":"run","date":"2026-03-01"}` + "\n"},
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
					m[output.PartitionOf(kv[0], 3)] += kv[0] + "\t" + kv[1] + "\n"
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
			dir := testdouble.Programs(t, scripts)
			if tt.noDir {
				dir = ""
			}
			cp := &fakeCP{spec: mustSpec(t, tt.spec), lease: time.Minute}
			b := newBlob()
			r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
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
			dir := testdouble.Programs(t, tt.scripts)
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
			r := &Runner{CP: cp, Blob: newBlob(), Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
			res := r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
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
			if res.Action != feed.Hide || res.Delay != handBackDelay || res.Err == nil || !strings.Contains(res.Err.Error(), tt.want) {
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

// TestExecEnvironment: the program gets the task's variables and a few of
// the host's, never the host's AWS settings or other secrets.
func TestExecEnvironment(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/creds")
	t.Setenv("BATCHWORK_TABLE", "table")
	t.Setenv("LANG", "C.UTF-8")
	dir := testdouble.Programs(t, map[string]string{"prog": "env | cut -d= -f1 | sort"})
	cp := &fakeCP{spec: mustSpec(t, execOne), lease: time.Minute}
	b := newBlob()
	r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
	r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
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
	for _, n := range []string{"LANG", "TMPDIR", execstage.EnvTaskJob, execstage.EnvTaskStage, execstage.EnvTaskPartition, execstage.EnvTaskAttempt, execstage.EnvTaskParams, execstage.EnvTaskParamPrefix + "SHARD_ID"} {
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
	dir := testdouble.Programs(t, map[string]string{"prog": `[ "$HOME" = "$(pwd)" ] && [ "$HOME" = "$TMPDIR" ] && echo "home is the working directory"
[ -e "$HOME/.aws/credentials" ] && echo "host credentials found through HOME"
env | cut -d= -f1 | grep '^AWS_' | sort`})
	cp := &fakeCP{spec: mustSpec(t, execOne), lease: time.Minute}
	b := newBlob()
	r := &Runner{CP: cp, Blob: b, Registry: NewRegistry(), Log: discard(), HeartbeatEvery: time.Hour, ExecDir: dir}
	r.Handle(context.Background(), feed.Delivery{Body: "j1/0/0"}, nil)
	got, err := b.Get(context.Background(), blob.OutputKey("j1", "s", 0, 1, 0))
	if err != nil {
		t.Fatalf("output: %v (causes %v)", err, cp.causes)
	}
	if want := "home is the working directory\n"; string(got) != want {
		t.Errorf("the program printed %q, want %q (HOME the attempt's working directory, no AWS_* variables)", got, want)
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
