// Package devrun runs a user's Batchwork installation on this machine for
// `batchwork dev`: it builds the user's executor, starts an AWS emulator,
// the control plane in this process and the executor beside it, and stops
// them again. What runs on it (uploads, the submit, following the job) is
// the command's: it talks to the API the session serves like any client.
package devrun

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/batchwork/batchwork/internal/emulator"
	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/gobuild"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/localauth"
	"github.com/batchwork/batchwork/shared/runner"
	"github.com/batchwork/batchwork/shared/tuning"
)

// Slots is the executor's concurrent tasks in dev.
const Slots = 4

// Listen is the API address with Options.Keep: the batchwork command's
// default endpoint.
const Listen = "127.0.0.1:8080"

// Options say what to run.
type Options struct {
	// Package is the user's executor's main package.
	Package string
	// ExecDir is the programs directory of exec stages (ExecDir), ""
	// for none; Programs are its programs.
	ExecDir  string
	Programs []string
	// Keep serves the API on Listen with a token file the batchwork
	// command finds, for use after the job; Getenv locates that file.
	Keep   bool
	Getenv func(string) string
	// Progress receives a line per step, for people.
	Progress io.Writer
}

// Session is a running installation: the emulator, the control plane and
// the user's executor.
type Session struct {
	// URL is the API's base URL, and Token the local runner's token.
	URL, Token string
	// LogFile holds the executor's log and the control plane's.
	LogFile string
	// done ends when the executor exits, with the cause, or at Stop.
	done context.Context
	// stops undo Start's steps, last first.
	stops []func()
}

// Start builds the user's executor and asks it for its task names, then
// starts the emulator, the control plane and the executor, writing a line
// per step to o.Progress. The executor is built first: a compile error
// should not wait for an emulator. On an error everything started is
// stopped again.
func Start(ctx context.Context, o Options) (_ *Session, err error) {
	s := &Session{}
	defer func() {
		if err != nil {
			s.Stop()
		}
	}()
	out := o.Progress
	work, err := os.MkdirTemp("", "batchwork-dev-")
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { os.RemoveAll(work) })

	fmt.Fprintf(out, "==> building your executor (%s)\n", o.Package)
	bin := filepath.Join(work, "executor")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if err := gobuild.Build("", o.Package, bin, "", ""); err != nil {
		return nil, err
	}
	names, err := gobuild.ListTasks(ctx, bin, o.Package)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "    tasks: %s\n", strings.Join(names, ", "))
	if o.ExecDir != "" {
		programs := strings.Join(o.Programs, ", ")
		if programs == "" {
			programs = "-"
		}
		fmt.Fprintf(out, "    programs (%s): %s\n", o.ExecDir, programs)
	}

	logFile, err := os.CreateTemp("", "batchwork-dev-*.log")
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { logFile.Close() })
	s.LogFile = logFile.Name()
	log := slog.New(slog.NewJSONHandler(logFile, nil))

	fmt.Fprintln(out, "==> starting the AWS emulator")
	emu, err := emulator.Start(ctx)
	if err != nil {
		return nil, err
	}
	s.stops = append(s.stops, func() { emu.Stop() })
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
		Control: control.Config{CheckTaskNames: true, StaticTaskNames: names, StaticPrograms: o.Programs, CountLinger: tuning.CountLinger},
	}
	if o.Keep {
		ropts.Listen = Listen
		if ropts.TokenDir, err = localauth.DefaultDir(o.Getenv); err != nil {
			return nil, err
		}
	}
	r, err := runner.New(ctx, ropts)
	if err != nil {
		return nil, err
	}
	runCtx, stopRunner := context.WithCancel(ctx)
	runnerDone := make(chan error, 1)
	go func() { runnerDone <- r.Run(runCtx) }()
	s.stops = append(s.stops, func() { stopRunner(); <-runnerDone })
	s.URL, s.Token = r.URL, r.Token

	exe := exec.Command(bin)
	exe.Env = executorEnv(os.Environ(), r, emu, o.ExecDir)
	exe.Stdout, exe.Stderr = logFile, logFile
	if err := exe.Start(); err != nil {
		return nil, fmt.Errorf("start your executor: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- exe.Wait() }()
	s.stops = append(s.stops, func() { stopExecutor(exe, exited) })
	fmt.Fprintf(out, "    API %s, bucket %s, executor pid %d with %d slots; logs in %s\n",
		r.URL, r.Resources.Bucket, exe.Process.Pid, Slots, logFile.Name())

	// A job is followed until it ends or the executor dies: a dead
	// executor would leave it waiting forever.
	done, cancel := context.WithCancelCause(ctx)
	s.done = done
	s.stops = append(s.stops, func() { cancel(nil) })
	go func() {
		select {
		case err := <-exited:
			exited <- err // for stopExecutor
			cancel(fmt.Errorf("your executor exited (%v); its log is in %s", err, logFile.Name()))
		case <-done.Done():
		}
	}()
	return s, nil
}

// Context ends when the executor exits, with that as its cause, or when
// the context Start was given ends.
func (s *Session) Context() context.Context { return s.done }

// Stop stops the executor (it drains first), the control plane and the
// emulator, and removes the session's files but its log.
func (s *Session) Stop() {
	for i := len(s.stops) - 1; i >= 0; i-- {
		s.stops[i]()
	}
	s.stops = nil
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
		"BATCHWORK_SLOTS": strconv.Itoa(Slots),
		// The emulator's dummy credentials: never the user's.
		"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": emu.Region,
		"AWS_ENDPOINT_URL": emu.URL,
	}
	if execDir != "" {
		set[execstage.EnvExecDir] = execDir
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
