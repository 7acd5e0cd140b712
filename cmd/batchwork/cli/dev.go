package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/devrun"
	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/shared/spec"
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

func runDev(ctx context.Context, a *app, args []string) int {
	specFile := "job.json"
	if len(args) == 1 {
		specFile = args[0]
	}
	body, err := readSpec(a.env, specFile)
	if err != nil {
		return a.fail(&usageError{fmt.Sprintf("read the spec: %v", err)})
	}
	execDir, err := devrun.ExecDir(a.o.execDir, a.env.Getenv)
	if err != nil {
		return a.fail(&usageError{err.Error()})
	}
	programs, err := execstage.Programs(execDir)
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
	} else if len(programs) == 0 && devrun.UsesExec(sp) {
		return a.fail(&usageError{fmt.Sprintf("%s has exec stages: give the directory of their programs with --exec-dir DIR (or set %s)", specFile, execstage.EnvExecDir)})
	}
	if err := devrun.FindServers(ctx); err != nil {
		return a.fail(err)
	}
	out := a.env.Stdout
	if a.json() {
		out = a.env.Stderr // stdout carries the watch's JSON lines
	}
	dev, err := devrun.Start(ctx, devrun.Options{Package: a.o.pkg, ExecDir: execDir, Programs: programs,
		Keep: a.o.keep, Getenv: a.env.Getenv, Progress: out})
	if err != nil {
		return a.fail(err)
	}
	defer dev.Stop()
	jobCtx := dev.Context()
	base, _ := url.Parse(dev.URL)
	a.api = newClient(base, &http.Client{Timeout: a.g.timeout, CheckRedirect: noRedirects}, client.LocalOwner{Owner: a.g.owner, Token: dev.Token}, "", a.env.Sleep)

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
		fmt.Fprintf(out, "==> serving on %s (the batchwork command's default endpoint) until ^C; try: batchwork status %s\n", dev.URL, id)
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
	key := fmt.Sprintf("dev-%d", time.Now().UnixNano())
	c, err := a.client(ctx)
	if err != nil {
		return "", a.fail(err)
	}
	res, err := c.Submit(ctx, body, client.SubmitOptions{IdempotencyKey: key})
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && len(ae.Errors) > 0 {
			for _, fe := range ae.Errors {
				fmt.Fprintln(a.env.Stderr, specError(file, fe))
			}
			if hint := devrun.ExecHint(ae.Errors, execDir); hint != "" {
				fmt.Fprintln(a.env.Stderr, hint)
			}
			fmt.Fprintf(a.env.Stderr, "batchwork dev: %s is not a valid job spec\n", file)
			return "", ExitInvalid
		}
		return "", a.fail(err)
	}
	return res.JobID, ExitOK
}
