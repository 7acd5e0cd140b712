// Package execstage runs exec stages' programs, the Hadoop Streaming
// convention. A stage's `exec: [program,
// args...]` runs a program with the task's input records on stdin; its
// stdout is the task's output (plain lines to output partition 0, or
// key<TAB>value lines routed like Output.Emit when the stage has a
// shuffle), and its stderr goes to the task log. A non-zero exit fails the
// attempt (exit status ExitPermanent, 65, fails its task at once, and a
// SIGKILL the executor did not send is an out-of-memory end:
// class.go). The program's outputs go through the same Output as a Go
// function's, so the attempt is published and committed, and fenced, the
// same way. It rejects records (executor.Rejects) and checkpoints (checkpoint.go)
// with lines on a control channel of its own, fd 3 (control.go): its
// stderr is only ever log text.
//
// Who may run what. An exec stage runs a program the spec names, and
// specs come from any owner, while the executor holds the stack's
// credentials. The programs are the operator's: installed by the operator,
// trusted code, like the executor itself. What keeps an owner from running
// code of their own is the choice of programs, not the process:
//   - A host runs programs only if its operator gave it a programs
//     directory (executor.Runner.ExecDir; the long-polling host reads EnvExecDir).
//     The Lambda executor never has one. A host that cannot run a stage's
//     program hands its message back unclaimed (executor.Runner.cannotRun), so no
//     attempt is spent where it can never succeed; submit refuses a
//     program no executor has published (control.checkPrograms).
//   - The program is a bare name (spec validation refuses a path) looked
//     up in that directory only, never on PATH: a spec runs what the
//     operator installed there, nothing else. Install scripts, not
//     interpreters or shells (a `python3` there would run any code an
//     argument holds).
//   - The program's environment is trimmed: PATH, LANG, LC_ALL, TZ from
//     the host, HOME and TMPDIR set to its working directory, and the
//     task's identity and parameters; not the host's AWS settings or
//     anything else it was given. That avoids accidents (an SDK in the
//     program picking up the executor's credentials, or the local user's
//     ~/.aws through HOME, and writing with them by mistake); it is no
//     boundary. The program runs as the executor's user, as its child, so
//     it can read the executor's own environment (/proc/$PPID/environ)
//     and reach whatever the executor can (the Fargate task role's
//     credential endpoint). Containing a hostile program would take a
//     separate user or a sandbox, which Batchwork does not provide: do not
//     install programs you would not run as the executor.
//   - It runs in a fresh working directory, removed afterwards, in its
//     own process group, which is killed when the task's context ends
//     (lease lost, job cancelled or failed).
package execstage

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
)

// EnvExecDir is the directory of programs exec stages may run, read by the
// long-polling host (Fargate and local). Unset: the host runs no exec
// stages.
const EnvExecDir = "BATCHWORK_EXEC_DIR"

// The variables an exec program gets besides the host's PATH, LANG, LC_ALL
// and TZ, and HOME and TMPDIR (its working directory).
const (
	EnvTaskJob       = "BATCHWORK_JOB"
	EnvTaskStage     = "BATCHWORK_STAGE"
	EnvTaskPartition = "BATCHWORK_PARTITION"
	EnvTaskAttempt   = "BATCHWORK_ATTEMPT"
	// EnvTaskParts is the number of output partitions (the shuffle's, or
	// 1); the executor routes key<TAB>value lines itself.
	EnvTaskParts = "BATCHWORK_PARTS"
	// EnvTaskFormat is the input's record format (lines, jsonl, csv).
	EnvTaskFormat = "BATCHWORK_FORMAT"
	// EnvTaskSource names the input prefix the task's split is of (the
	// input's name in the spec, or its index); unset for a task that
	// reads no split.
	EnvTaskSource = "BATCHWORK_SOURCE"
	// EnvTaskHeader is a CSV input's column names as a JSON array.
	EnvTaskHeader = "BATCHWORK_HEADER"
	// EnvTaskParams holds the partition's parameters as a JSON object,
	// exactly; each is also in EnvTaskParamPrefix + its name, upper-cased,
	// with every character other than A-Z, 0-9 and '_' replaced by '_'.
	EnvTaskParams      = "BATCHWORK_PARAMS"
	EnvTaskParamPrefix = "BATCHWORK_PARAM_"
)

// errExecHost is an exec stage's failure on a host without programs.
var errExecHost = errors.New("exec stages run on the Fargate or local executor, with a programs directory (" + EnvExecDir +
	"); this executor runs none")

const (
	// execWaitDelay bounds how long a program's pipes may stay open after
	// it exits (a background child holding them) or after it was killed.
	execWaitDelay = 5 * time.Second
	// maxStderrLines bounds the stderr lines logged per attempt, and
	// maxStderrLine each line's length: a chatty program must not flood
	// the logs. The rest is counted and reported.
	maxStderrLines = 1000
	maxStderrLine  = 4 << 10
	// stderrTail is how many of the last stderr lines a failure carries.
	stderrTail = 10
	// maxStdoutLine bounds one stdout line held while it is parsed, as
	// Records bounds a record.
	maxStdoutLine = 16 << 20
)

// ExecDirFromEnv returns the programs directory from EnvExecDir: "" when
// unset, or when running on Lambda, which never runs programs.
func ExecDirFromEnv() (string, error) {
	dir := os.Getenv(EnvExecDir)
	if dir == "" || os.Getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		return "", nil
	}
	if !filepath.IsAbs(dir) {
		return "", fmt.Errorf("%s=%q: want an absolute path", EnvExecDir, dir)
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("%s: %w", EnvExecDir, err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("%s=%q: not a directory", EnvExecDir, dir)
	}
	return dir, nil
}

// Programs lists the programs in dir that an exec stage can name, sorted:
// its executable regular files (symbolic links followed) whose names are
// bare program names (spec.ValidProgramName), at most
// control.MaxPublishedNames. A host publishes them when it starts
// (control.Service.PublishPrograms), so submit can refuse a program no
// executor has. "" lists none.
func Programs(dir string) ([]string, error) {
	if dir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("list programs: %w", err)
	}
	var names []string
	for _, e := range entries { // sorted by name
		if !spec.ValidProgramName(e.Name()) {
			continue
		}
		fi, err := os.Stat(filepath.Join(dir, e.Name()))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			continue
		}
		names = append(names, e.Name())
		if len(names) == control.MaxPublishedNames {
			break
		}
	}
	return names, nil
}

// Program is an exec stage's program as this host runs it: found in the
// programs directory, with the stage's arguments, under its attempt's
// limits.
type Program struct {
	path    string
	args    []string
	shuffle bool
	lim     Limits
}

// New returns stage st's program in the programs directory dir, to run
// under lim, or why this host cannot run it (Find).
func New(dir string, st spec.Stage, lim Limits) (*Program, error) {
	prog, err := Find(dir, st)
	if err != nil {
		return nil, err
	}
	return &Program{path: prog, args: slices.Clone(st.Exec[1:]), shuffle: st.Shuffle != nil, lim: lim}, nil
}

// Run runs the program on a's input and collects its stdout into a's
// outputs.
func (p *Program) Run(ctx context.Context, a *Attempt) error {
	return runProgram(ctx, p.path, p.args, p.shuffle, p.lim, a)
}

// Find is the path of exec stage st's program in the programs directory
// dir, or why this host cannot run it: it has no directory (""), or the
// directory lacks the program.
func Find(dir string, st spec.Stage) (string, error) {
	if dir == "" {
		return "", errExecHost
	}
	if len(st.Exec) == 0 {
		return "", errors.New("exec: want a program and its arguments")
	}
	name := st.Exec[0]
	// Validation refuses paths; a stored spec is checked again, since
	// only a bare name keeps the lookup inside the directory.
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, `/\`) {
		return "", fmt.Errorf("exec: %q is not a program name", name)
	}
	prog := filepath.Join(dir, name)
	fi, err := os.Stat(prog)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("exec: program %q is not installed in this executor's programs directory", name)
	case err != nil:
		return "", fmt.Errorf("exec: %w", err)
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("exec: %q in this executor's programs directory is not an executable file", name)
	}
	return prog, nil
}

// Attempt is the task attempt a program runs for: who it is, what it
// reads, where its stdout goes, and what its control channel may do. The
// runner fills it from its task (executor.Task).
type Attempt struct {
	Job       string
	Stage     string
	Partition int
	Attempt   int
	// Format is the input's record format ("" is "lines"), Header a CSV
	// input's column names, Params the partition's parameters.
	Format string
	Header []string
	Params map[string]string
	// RunParams are the job's run parameters (runparams.go).
	RunParams map[string]string
	// Source names the input the split is of (EnvTaskSource); "": none.
	Source string
	// Input is the program's stdin; nil: none.
	Input io.Reader
	Out   Output
	// Log gets the program's stderr, line by line; nil: not logged.
	Log *slog.Logger
	// Rejects takes the records the program rejects; nil: it cannot
	// reject records.
	Rejects Rejects
	// Checkpoints saves the program's checkpoints; nil: it cannot
	// checkpoint (no fd 4).
	Checkpoints Checkpoints
	// Resume is the checkpoint the attempt resumes from; nil: it starts
	// afresh.
	Resume *Resume
}

// Output is the attempt's outputs (output.Output): plain stdout goes to
// partition 0 through Write, a shuffle's key<TAB>value lines through
// Emit.
type Output interface {
	Write(p []byte) (int, error)
	Emit(key, value string) error
	Parts() int
}

// Rejects takes a rejected record (executor.Rejects); past the stage's
// maxBadRecords it says so, and the runner fails the attempt.
type Rejects interface {
	Reject(offset int64, record []byte, reason string) error
}

// Checkpoints saves a checkpoint of the attempt (the runner's, which
// seals the outputs so far and records it with the claim).
type Checkpoints interface {
	Save(ctx context.Context, offset int64, state []byte) error
}

// Resume is where a resumed attempt starts: its offset in the task's
// input and its state.
type Resume struct {
	Offset int64
	State  []byte
}

// runProgram runs prog on t's input under lim and collects its stdout
// into t.Out.
func runProgram(ctx context.Context, prog string, args []string, shuffle bool, lim Limits, t *Attempt) error {
	name := filepath.Base(prog)
	work, err := os.MkdirTemp("", "batchwork-exec-")
	if err != nil {
		return fmt.Errorf("exec %s: working directory: %w", name, err)
	}
	defer os.RemoveAll(work)

	runCtx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	cmd := exec.CommandContext(runCtx, prog, args...)
	cmd.Dir = work
	cmd.Env = execEnv(t, work)
	killGroup(cmd) // the program and whatever it started
	cmd.WaitDelay = execWaitDelay
	if t.Input != nil {
		cmd.Stdin = t.Input
	}
	out := &stdoutSink{out: t.Out, shuffle: shuffle, stop: stop}
	errs := &stderrSink{log: t.Log}
	cmd.Stderr = errs
	// Stdout through a pump, the control channel and checkpoints:
	// checkpoint.go.
	waited, err := plumbExec(ctx, cmd, t, out)
	if err != nil {
		return fmt.Errorf("exec %s: %w", name, err)
	}
	var guard *execGuard
	runErr := cmd.Start()
	if runErr == nil {
		// Its limits, and the watchdog that stops it (limits.go).
		var unwatch func()
		guard, unwatch = startGuard(name, cmd.Process.Pid, lim, stop)
		runErr = cmd.Wait()
		unwatch()
	}
	runErr = waited(runErr)
	if runErr == nil || errors.Is(runErr, exec.ErrWaitDelay) {
		out.finish()
	}
	errs.finish()
	limited := guard.exitVerdict(stateOf(cmd), runErr, errs.tail())

	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("exec %s: stopped: %w", name, context.Cause(ctx))
	case limited != nil:
		return limited
	case out.failed() != nil:
		return fmt.Errorf("exec %s: %w", name, out.failed())
	case errors.As(runErr, &exit):
		return exitError(name, exit, errs.tail()) // class.go: permanent, out of memory or plain
	case errors.Is(runErr, exec.ErrWaitDelay):
		return fmt.Errorf("exec %s: exited, but its output stayed open %v longer (a background process it started?)", name, execWaitDelay)
	case runErr != nil:
		// Starting failed, or reading the task's input did.
		return fmt.Errorf("exec %s: %w", name, runErr)
	}
	return out.failed()
}

func exitDescription(e *exec.ExitError) string {
	if code := e.ExitCode(); code >= 0 {
		return "exit code " + strconv.Itoa(code)
	}
	return e.ProcessState.String() // killed by a signal
}

// execEnv is the program's environment: see the file comment.
func execEnv(t *Attempt, work string) []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	// HOME is the working directory, not the executor user's: tools that
	// look there for settings and credentials (the AWS SDKs' ~/.aws) find
	// none of the host's, and their caches are removed with the directory.
	env = append(env, "HOME="+work, "TMPDIR="+work,
		EnvTaskJob+"="+t.Job,
		EnvTaskStage+"="+t.Stage,
		EnvTaskPartition+"="+strconv.Itoa(t.Partition),
		EnvTaskAttempt+"="+strconv.Itoa(t.Attempt),
		EnvTaskParts+"="+strconv.Itoa(t.Out.Parts()),
		EnvTaskFormat+"="+cmp.Or(t.Format, "lines"),
	)
	if t.Source != "" {
		env = append(env, EnvTaskSource+"="+t.Source)
	}
	if t.Header != nil {
		b, _ := json.Marshal(t.Header)
		env = append(env, EnvTaskHeader+"="+string(b))
	}
	params := t.Params
	if params == nil {
		params = map[string]string{}
	}
	b, _ := json.Marshal(params)
	env = append(env, EnvTaskParams+"="+string(b))
	// Sorted, so that when two names map to the same variable the result
	// does not depend on map order (the later name wins).
	names := make([]string, 0, len(params))
	for k := range params {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		env = append(env, EnvTaskParamPrefix+paramVar(k)+"="+strings.ReplaceAll(params[k], "\x00", ""))
	}
	return append(env, runParamsEnv(t.RunParams)...) // runparams.go
}

// paramVar maps a parameter name to the tail of its variable's name.
func paramVar(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b)
}

// stdoutSink turns the program's stdout into the task's outputs. Plain
// output is copied to partition 0 as it comes; with a shuffle, every line
// must be key<TAB>value and goes where Output.Emit sends its key. The first
// problem stops the program.
type stdoutSink struct {
	out     Output
	shuffle bool
	stop    context.CancelCauseFunc

	line    int          // lines parsed so far
	partial bytes.Buffer // a line not yet ended (shuffle)
	err     error
}

func (s *stdoutSink) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if !s.shuffle {
		if _, err := s.out.Write(p); err != nil {
			return 0, s.fail(err)
		}
		return len(p), nil
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			if s.partial.Len()+len(p) > maxStdoutLine {
				return 0, s.fail(fmt.Errorf("stdout line %d is longer than %d bytes", s.line+1, maxStdoutLine))
			}
			s.partial.Write(p)
			break
		}
		var line []byte
		if s.partial.Len() > 0 {
			s.partial.Write(p[:i])
			line = s.partial.Bytes()
		} else {
			line = p[:i]
		}
		if err := s.record(line); err != nil {
			return 0, err
		}
		s.partial.Reset()
		p = p[i+1:]
	}
	return n, nil
}

// record emits one complete stdout line of a shuffle stage.
func (s *stdoutSink) record(line []byte) error {
	s.line++
	k, v, ok := bytes.Cut(line, []byte{'\t'})
	if !ok {
		return s.fail(fmt.Errorf("stdout line %d has no tab: a stage with a shuffle writes key<TAB>value lines (got %q)",
			s.line, truncate(string(line), 80)))
	}
	if err := s.out.Emit(string(k), string(v)); err != nil {
		return s.fail(fmt.Errorf("stdout line %d: %w", s.line, err))
	}
	return nil
}

// finish handles a last line without a newline, after a clean exit.
func (s *stdoutSink) finish() {
	if s.err == nil && s.shuffle && s.partial.Len() > 0 {
		s.record(s.partial.Bytes())
		s.partial.Reset()
	}
}

func (s *stdoutSink) fail(err error) error {
	s.err = err
	s.stop(err)
	return err
}

// failed is the first problem with the program's stdout, if any. Run
// returns only after the copying goroutine is done, so no lock is needed.
func (s *stdoutSink) failed() error { return s.err }

// stderrSink logs the program's stderr line by line, bounded, and keeps
// the last lines for a failure's message. Every line is log text, however
// it starts: control lines have their own channel (control.go).
type stderrSink struct {
	log *slog.Logger

	mu      sync.Mutex
	partial []byte
	logged  int
	dropped int
	last    []string // ring of the last stderrTail lines
}

func (s *stderrSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			// Keep at most a line's worth; the rest of a huge line is
			// dropped, not buffered.
			room := maxStderrLine - len(s.partial)
			s.partial = append(s.partial, p[:max(0, min(room, len(p)))]...)
			break
		}
		s.partial = append(s.partial, p[:min(i, max(0, maxStderrLine-len(s.partial)))]...)
		s.line(string(s.partial))
		s.partial = s.partial[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (s *stderrSink) line(l string) {
	l = strings.TrimSuffix(l, "\r")
	if len(s.last) == stderrTail {
		s.last = s.last[1:]
	}
	s.last = append(s.last, l)
	if s.logged >= maxStderrLines {
		s.dropped++
		return
	}
	s.logged++
	if s.log != nil {
		s.log.Info("stderr", "line", l)
	}
}

func (s *stderrSink) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.partial) > 0 {
		s.line(string(s.partial))
		s.partial = nil
	}
	if s.dropped > 0 && s.log != nil {
		s.log.Warn("stderr truncated", "lines_not_logged", s.dropped, "limit", maxStderrLines)
	}
}

// tail is the last stderr lines, for a failure's message.
func (s *stderrSink) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.last) == 0 {
		return "; no stderr"
	}
	lines := make([]string, len(s.last))
	for i, l := range s.last {
		lines[i] = truncate(l, 300)
	}
	return "; last stderr lines:\n" + strings.Join(lines, "\n")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary: the message is stored as a string.
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
