package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/scaffold"
	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/gobuild"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tuning"
)

var devCommand = &command{name: "dev", args: "[SPEC]", summary: "run a job spec on your machine: emulated AWS, the control plane and your executor",
	help: `Runs SPEC (default job.json) on this machine, from your module's directory:
builds your executor (-package, a main package that calls batchwork.Main) and
asks it for its task names, starts an AWS emulator (moto, and DynamoDB Local),
the Batchwork control plane in this process and your executor beside it,
uploads the -data directory into your inputs area (a spec names it as
inputs:data/), submits SPEC, shows its progress and prints its outputs. Then it
stops everything, or with -keep keeps it all running for the batchwork command
on http://127.0.0.1:8080 until ^C.

The emulator's servers are looked for beside your module, then in the
directory of the Batchwork module it requires (a checkout where 'make venv
dynamodb-local' ran), then in $XDG_CACHE_HOME/batchwork; the error says how to
install them. With AWS_ENDPOINT_URL set, that endpoint is used instead.
Exec stages run the programs of --exec-dir (default $BATCHWORK_EXEC_DIR);
without it, a spec with an exec stage is refused.
The executor's log and the control plane's go to a file it names.
Exits like 'watch': 0 if the job succeeded, 6 if it failed.`,
	examples: []string{
		"batchwork dev",
		"batchwork dev other.json -package ./cmd/executor",
		"batchwork dev -keep    # then, elsewhere: batchwork list",
		"batchwork dev exec.json --exec-dir ./programs",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.pkg, "package", ".", "your executor's main package")
		fs.StringVar(&o.data, "data", "data", "directory uploaded into your inputs area as data/ before submitting (\"\": none)")
		fs.BoolVar(&o.keep, "keep", false, "after the job, keep serving on 127.0.0.1:8080 until ^C")
		fs.StringVar(&o.execDir, "exec-dir", "", "directory of the programs exec stages run (default $BATCHWORK_EXEC_DIR)")
	},
	maxArgs: 1, run: runDev}

// devSlots is the executor's concurrent tasks in dev.
const devSlots = 4

// devListen is the API address with -keep: the batchwork command's default
// endpoint.
const devListen = "127.0.0.1:8080"

func runDev(ctx context.Context, a *app, args []string) int {
	specFile := "job.json"
	if len(args) == 1 {
		specFile = args[0]
	}
	body, err := readSpec(a.env, specFile)
	if err != nil {
		return a.fail(&usageError{fmt.Sprintf("read the spec: %v", err)})
	}
	execDir, err := devExecDir(a.o.execDir, a.env.Getenv) // devexec.go
	if err != nil {
		return a.fail(&usageError{err.Error()})
	}
	programs, err := executor.Programs(execDir)
	if err != nil {
		return a.fail(&usageError{fmt.Sprintf("--exec-dir: %v", err)})
	}
	// What takes a moment to check comes before the build, which takes a
	// minute on a new project: the spec, offline (the task names wait for
	// the build), and the emulator's servers.
	if sp, err := spec.Parse(body); err != nil {
		var ve *spec.ValidationError
		if !errors.As(err, &ve) {
			return a.fail(err)
		}
		for _, fe := range ve.Errors {
			fmt.Fprintln(a.env.Stderr, specError(specFile, fe))
		}
		fmt.Fprintf(a.env.Stderr, "batchwork dev: %s is not a valid job spec\n", specFile)
		return ExitInvalid
	} else if len(programs) == 0 && usesExec(sp) {
		return a.fail(&usageError{fmt.Sprintf("%s has exec stages: give the directory of their programs with --exec-dir DIR (or set %s)", specFile, executor.EnvExecDir)})
	}
	if err := findEmulatorServers(os.Getenv, os.Setenv, emulatorSearch(ctx, os.Getenv)); err != nil {
		return a.fail(err)
	}
	out := a.env.Stdout
	if a.json() {
		out = a.env.Stderr // stdout carries the watch's JSON lines
	}
	work, err := os.MkdirTemp("", "batchwork-dev-")
	if err != nil {
		return a.fail(err)
	}
	defer os.RemoveAll(work)

	// The executor first: a compile error should not wait for an emulator.
	fmt.Fprintf(out, "==> building your executor (%s)\n", a.o.pkg)
	bin := filepath.Join(work, "executor")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if err := gobuild.Build("", a.o.pkg, bin, "", ""); err != nil {
		return a.fail(err)
	}
	names, err := gobuild.ListTasks(ctx, bin, a.o.pkg)
	if err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(out, "    tasks: %s\n", strings.Join(names, ", "))
	if execDir != "" {
		fmt.Fprintf(out, "    programs (%s): %s\n", execDir, orDash(strings.Join(programs, ", ")))
	}

	logFile, err := os.CreateTemp("", "batchwork-dev-*.log")
	if err != nil {
		return a.fail(err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewJSONHandler(logFile, nil))

	fmt.Fprintln(out, "==> starting the AWS emulator")
	emu, err := emulator.Start(ctx)
	if err != nil {
		return a.fail(err)
	}
	defer emu.Stop()
	fmt.Fprintf(out, "    %s at %s\n", emu.Kind, emu.URL)
	if emu.DynamoURL != emu.URL {
		fmt.Fprintf(out, "    DynamoDB: %s at %s\n", emu.Dynamo, emu.DynamoURL)
	}

	fmt.Fprintln(out, "==> starting the control plane and your executor")
	ropts := runner.Options{
		AWS: emu.AWSConfig(), Prefix: fmt.Sprintf("dev-%d", time.Now().Unix()), ControlOnly: true,
		SweepEvery: 5 * time.Second, Log: log,
		// batchwork logs reads this file, the executor's lines included.
		LogFile: logFile.Name(),
		// Submits are checked against the executor's names, as the
		// deployed stack's are (the construct learns them at synth).
		// Programs likewise: the executor publishes them too, but only once
		// it has started, which the submit does not wait for.
		Control: control.Config{CheckTaskNames: true, StaticTaskNames: names, StaticPrograms: programs, CountLinger: tuning.CountLinger},
	}
	if a.o.keep {
		ropts.Listen = devListen
		if ropts.TokenDir, err = localauth.DefaultDir(a.env.Getenv); err != nil {
			return a.fail(err)
		}
	}
	r, err := runner.New(ctx, ropts)
	if err != nil {
		return a.fail(err)
	}
	runCtx, stopRunner := context.WithCancel(ctx)
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- r.Run(runCtx) }()
	defer func() { stopRunner(); <-runnerDone }()

	exe := exec.Command(bin)
	exe.Env = executorEnv(os.Environ(), r, emu, execDir)
	exe.Stdout, exe.Stderr = logFile, logFile
	if err := exe.Start(); err != nil {
		return a.fail(fmt.Errorf("start your executor: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- exe.Wait() }()
	defer stopExecutor(exe, exited)
	fmt.Fprintf(out, "    API %s, bucket %s, executor pid %d with %d slots; logs in %s\n",
		r.URL, r.Resources.Bucket, exe.Process.Pid, devSlots, logFile.Name())

	// The job is followed until it ends or the executor dies: a dead
	// executor would leave it waiting forever.
	jobCtx, cancelJob := context.WithCancelCause(ctx)
	defer cancelJob(nil)
	go func() {
		select {
		case err := <-exited:
			exited <- err // for stopExecutor
			cancelJob(fmt.Errorf("your executor exited (%v); its log is in %s", err, logFile.Name()))
		case <-jobCtx.Done():
		}
	}()
	base, _ := url.Parse(r.URL)
	a.api = newClient(base, &http.Client{Timeout: a.g.timeout, CheckRedirect: noRedirects}, client.LocalOwner{Owner: a.g.owner, Token: r.Token}, "", a.env.Sleep)

	if a.o.data != "" {
		if st, err := os.Stat(a.o.data); err == nil && st.IsDir() {
			fmt.Fprintf(out, "==> uploading %s into your inputs area\n", a.o.data)
			if code := runUpload(jobCtx, a, []string{a.o.data, "data"}); code != ExitOK {
				return a.devExit(jobCtx, code)
			}
		}
	}
	fmt.Fprintf(out, "==> submitting %s\n", specFile)
	id, code := a.submitSpec(jobCtx, specFile, body, execDir)
	if code != ExitOK {
		return a.devExit(jobCtx, code)
	}
	fmt.Fprintf(out, "    job %s\n", id)
	if a.o.interval == 0 {
		a.o.interval = 500 * time.Millisecond
	}
	code = a.watch(jobCtx, id)
	if code == ExitInterrupt {
		return a.devExit(jobCtx, code)
	}
	if code == ExitOK && !a.json() {
		fmt.Fprintln(out, "==> results")
		if rc := runResult(jobCtx, a, []string{id}); rc != ExitOK {
			return a.devExit(jobCtx, rc)
		}
	}
	if a.o.keep {
		fmt.Fprintf(out, "==> serving on %s (the batchwork command's default endpoint) until ^C; try: batchwork status %s\n", r.URL, id)
		<-jobCtx.Done()
		return a.devExit(jobCtx, code)
	}
	return code
}

// devExit reports why the job's context ended, when it was the executor
// dying, and returns code otherwise.
func (a *app) devExit(jobCtx context.Context, code int) int {
	if cause := context.Cause(jobCtx); cause != nil && !errors.Is(cause, context.Canceled) {
		fmt.Fprintf(a.env.Stderr, "batchwork dev: %v\n", cause)
		return ExitError
	}
	return code
}

// submitSpec submits body and returns the job id, printing a spec's
// field errors like submit does.
func (a *app) submitSpec(ctx context.Context, file string, body []byte, execDir string) (string, int) {
	h := http.Header{"Idempotency-Key": {fmt.Sprintf("dev-%d", time.Now().UnixNano())}}
	if !strings.HasPrefix(strings.TrimSpace(string(body)), "{") {
		h.Set("Content-Type", "application/yaml")
	}
	var res control.SubmitResult
	if err := a.post(ctx, "/jobs", body, h, &res); err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && len(ae.Errors) > 0 {
			for _, fe := range ae.Errors {
				fmt.Fprintln(a.env.Stderr, specError(file, fe))
			}
			if hint := devExecHint(ae.Errors, execDir); hint != "" {
				fmt.Fprintln(a.env.Stderr, hint)
			}
			fmt.Fprintf(a.env.Stderr, "batchwork dev: %s is not a valid job spec\n", file)
			return "", ExitInvalid
		}
		return "", a.fail(err)
	}
	return res.JobID, ExitOK
}

// executorEnv is the executor's environment: the caller's, without any
// AWS account settings or Batchwork variables, plus the runner's resources
// (shared/lambdaenv's variables) on the emulator and the programs
// directory, execDir, when there is one.
func executorEnv(base []string, r *runner.Runner, emu *emulator.Emulator, execDir string) []string {
	env := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "BATCHWORK_")
	})
	q := r.Resources.Queues
	set := map[string]string{
		lambdaenv.EnvTable: r.Resources.Table, lambdaenv.EnvBucket: r.Resources.Bucket,
		lambdaenv.EnvQueueHigh: q.High, lambdaenv.EnvQueueNormal: q.Normal, lambdaenv.EnvQueueLow: q.Low, lambdaenv.EnvDLQ: q.DLQ,
		"BATCHWORK_SLOTS": strconv.Itoa(devSlots),
		// The emulator's dummy credentials: never the user's.
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": emu.Region,
		"AWS_ENDPOINT_URL": emu.URL,
	}
	if execDir != "" {
		set[executor.EnvExecDir] = execDir
	}
	if emu.DynamoURL != emu.URL {
		// Needed beside AWS_ENDPOINT_URL (see emulator.AWSConfig).
		set["AWS_ENDPOINT_URL_DYNAMODB"] = emu.DynamoURL
	}
	for k, v := range set {
		env = append(env, k+"="+v)
	}
	slices.Sort(env)
	return env
}

// stopExecutor asks the executor to drain (SIGTERM), and kills it if it
// has not stopped in time.
func stopExecutor(exe *exec.Cmd, exited chan error) {
	_ = exe.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		_ = exe.Process.Kill()
		<-exited
	}
}

// serverSearch is where findEmulatorServers looks: dirs in order, of
// which modDir is the Batchwork module's and cache the install directory.
type serverSearch struct {
	dirs          []string
	modDir, cache string
}

// emulatorSearch looks beside the user's module (the emulator's own
// lookup, kept first), in the directory of the Batchwork module it
// requires (a replace's checkout, where `make venv dynamodb-local` may
// have run), and in $XDG_CACHE_HOME/batchwork.
func emulatorSearch(ctx context.Context, getenv func(string) string) serverSearch {
	var s serverSearch
	if wd, err := os.Getwd(); err == nil {
		s.dirs = append(s.dirs, moduleRoot(wd))
	}
	if s.modDir = batchworkModuleDir(ctx); s.modDir != "" {
		s.dirs = append(s.dirs, s.modDir)
	}
	cache := getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		s.cache = filepath.Join(cache, "batchwork")
		s.dirs = append(s.dirs, s.cache)
	}
	return s
}

// findEmulatorServers points the emulator at moto and DynamoDB Local,
// which its own lookup (beside the nearest go.mod: the user's module)
// would not find, by setting the emulator's variables through setenv; it
// fails with how to install what is missing. Variables the user set, and
// an endpoint in AWS_ENDPOINT_URL, win.
func findEmulatorServers(getenv func(string) string, setenv func(k, v string) error, s serverSearch) error {
	if getenv(emulator.EnvEndpointURL) != "" || (getenv(emulator.EnvEmulator) != "" && getenv(emulator.EnvEmulator) != emulator.KindMoto) {
		return nil
	}
	needMoto := getenv(emulator.EnvMotoServer) == ""
	needDynamo := getenv(emulator.EnvDynamoDBLocalDir) == "" && getenv(emulator.EnvEndpointURLDynamoDB) == "" &&
		getenv(emulator.EnvDynamoDB) != emulator.DynamoDBMoto
	var missing []string
	if needMoto {
		if p := firstExisting(s.dirs, func(d string) string { return filepath.Join(d, ".venv", "bin", "moto_server") }); p != "" {
			if err := setenv(emulator.EnvMotoServer, p); err != nil {
				return err
			}
		} else {
			missing = append(missing, "moto")
		}
	}
	if needDynamo {
		has := func(d string) string {
			lib := filepath.Join(d, ".dynamodb-local", "lib")
			if m, _ := filepath.Glob(filepath.Join(lib, "DynamoDBLocal-*.jar")); len(m) > 0 {
				return lib
			}
			return ""
		}
		if p := firstExisting(s.dirs, has); p != "" {
			if err := setenv(emulator.EnvDynamoDBLocalDir, p); err != nil {
				return err
			}
		} else {
			missing = append(missing, "DynamoDB Local")
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return emulatorInstallError(missing, s.dirs, s.modDir, s.cache)
}

// emulatorInstallError says how to install the missing servers into the
// cache directory, from the Batchwork module's pinned versions.
func emulatorInstallError(missing, dirs []string, modDir, cache string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s not found (looked in %s). Install into %s:\n", strings.Join(missing, " and "), strings.Join(dirs, ", "), cache)
	src := modDir
	if src == "" {
		src = "<the Batchwork module's directory: go list -m -f '{{.Dir}}' " + scaffold.Module + ">"
	}
	if slices.Contains(missing, "moto") {
		fmt.Fprintf(&b, "  python3 -m venv %s/.venv && %s/.venv/bin/pip install -r %s/internal/emulator/requirements.txt\n", cache, cache, src)
	}
	if slices.Contains(missing, "DynamoDB Local") {
		fmt.Fprintf(&b, "  mvn -q -f %s/internal/emulator/pom.xml dependency:copy-dependencies -DoutputDirectory=%s/.dynamodb-local/lib   # Maven and Java 17\n", src, cache)
		fmt.Fprintf(&b, "  (or use moto's own DynamoDB: %s=%s)\n", emulator.EnvDynamoDB, emulator.DynamoDBMoto)
	}
	fmt.Fprintf(&b, "or point %s at a running emulator", emulator.EnvEndpointURL)
	return errors.New(b.String())
}

func firstExisting(dirs []string, find func(dir string) string) string {
	for _, d := range dirs {
		if p := find(d); p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	return ""
}

// moduleRoot is the directory of the nearest go.mod at or above dir (dir
// itself when there is none).
func moduleRoot(dir string) string {
	for d := dir; ; {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// batchworkModuleDir is the directory of the Batchwork module the working
// directory's module builds with ("" if go cannot say).
func batchworkModuleDir(ctx context.Context) string {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", scaffold.Module)
	var out bytes.Buffer
	cmd.Stdout = &out
	if err := cmd.Run(); err != nil {
		return ""
	}
	return strings.TrimSpace(out.String())
}
