package batchwork

// Building the Lambda functions at synth time, without Docker. Go cross-
// compiles, so `go build` with GOOS=linux GOARCH=arm64 CGO_ENABLED=0 makes
// a provided.al2023 bootstrap on any machine that has Go: the user's
// executor (Props.ExecutorPackage), and the control plane's own functions
// when Props.BinDir holds no prebuilt bootstrap (an app in the user's own
// module, where no `make build` ran). The executor is also built for the
// host and asked for its task names (BATCHWORK_LIST_TASKS=1, see
// shared/batchwork.Main), which reach the submitting functions so a spec
// naming an unknown task is refused at submit.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/batchwork/batchwork/internal/gobuild"
	"github.com/batchwork/batchwork/shared/lambdaenv"
)

// FunctionsPackage is the import path prefix of the control plane's
// functions (functions/<name>), built from the user's module when
// Props.BinDir has no bootstrap: a module that requires
// github.com/batchwork/batchwork can build them by import path.
const FunctionsPackage = "github.com/batchwork/batchwork/functions/"

// EnvTaskNames carries the executor's task names, comma-separated, to the
// submitting functions (api, sweep): lambdaenv's, which they read.
const EnvTaskNames = lambdaenv.EnvTaskNames

// functionCode is the code of function name: the user's executor package,
// else BinDir/<name>/bootstrap when it exists, else functions/<name> built
// now.
func (b *Batchwork) functionCode(p Props, name string) awslambda.Code {
	if name == FnExecutor && p.ExecutorPackage != "" {
		return awslambda.Code_FromAsset(jsii.String(b.buildLambda(p, "executor", p.ExecutorPackage)), nil)
	}
	dir := filepath.Join(p.BinDir, name)
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); err == nil {
		return awslambda.Code_FromAsset(jsii.String(dir), nil)
	}
	return awslambda.Code_FromAsset(jsii.String(b.buildLambda(p, name, FunctionsPackage+name)), nil)
}

// buildDir is where this construct's builds go: under the app's output
// directory (cdk.out), one folder per construct, reused by every synth.
func (b *Batchwork) buildDir() string {
	outdir := "."
	if st := awscdk.Stage_Of(b.Construct); st != nil && st.Outdir() != nil {
		outdir = *st.Outdir()
	}
	sum := sha256.Sum256([]byte(*b.Node().Path()))
	return filepath.Join(outdir, "batchwork-build", hex.EncodeToString(sum[:6]))
}

// buildLambda builds pkg for Lambda into <buildDir>/<name>/bootstrap and
// returns that folder. A build that fails stops the synth with go's
// output: a stack without its code cannot deploy.
func (b *Batchwork) buildLambda(p Props, name, pkg string) string {
	dir := filepath.Join(b.buildDir(), "lambda", name)
	if err := os.RemoveAll(dir); err != nil {
		panic(fmt.Sprintf("batchwork: build %s: %v", name, err))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		panic(fmt.Sprintf("batchwork: build %s: %v", name, err))
	}
	if err := gobuild.Build(p.ModuleDir, pkg, filepath.Join(dir, "bootstrap"), "linux", "arm64", gobuild.LambdaFlags...); err != nil {
		panic(fmt.Sprintf("batchwork: build the %s function from %s for linux/arm64: %v", name, pkg, err))
	}
	return dir
}

// taskNames are the names the submitting functions accept: Props.TaskNames
// when given, else those the executor package lists; none without either
// (publishTaskNames refuses that).
func (b *Batchwork) taskNames(p Props) []string {
	if len(p.TaskNames) > 0 {
		names := slices.Clone(p.TaskNames)
		slices.Sort(names)
		return slices.Compact(names)
	}
	if p.ExecutorPackage == "" {
		return nil
	}
	tmp := filepath.Join(b.buildDir(), "host")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		panic("batchwork: list the executor's tasks: " + err.Error())
	}
	bin := filepath.Join(tmp, "list-tasks")
	if runtime.GOOS == "windows" {
		bin += ".exe"
	}
	if err := gobuild.Build(p.ModuleDir, p.ExecutorPackage, bin, "", ""); err != nil {
		panic(fmt.Sprintf("batchwork: build the executor %s for this machine, to list its tasks: %v", p.ExecutorPackage, err))
	}
	names, err := gobuild.ListTasks(context.Background(), bin, p.ExecutorPackage)
	_ = os.Remove(bin) // only needed for this run; no asset
	if err != nil {
		panic("batchwork: list the executor's tasks: " + err.Error())
	}
	if len(names) == 0 {
		panic(fmt.Sprintf("batchwork: executor package %s registers no task: register one with batchwork.Register before batchwork.Main", p.ExecutorPackage))
	}
	return names
}

// publishTaskNames gives the submitting functions the executor's task
// names: a Lambda executor publishes its names only when first invoked,
// so without this the first job's names could not be checked.
func (b *Batchwork) publishTaskNames(p Props) {
	names := b.taskNames(p)
	if len(names) == 0 {
		// The api refuses every task name no executor has published, and
		// a Lambda executor (or a Fargate service at zero) starts only
		// once work is queued: without names no job could ever start.
		panic("batchwork: the api checks task names at submit, and nothing tells it this installation's: " +
			"set ExecutorPackage (its names are listed at synth) or TaskNames")
	}
	for _, fn := range []string{FnAPI, FnSweep} {
		b.Functions[fn].AddEnvironment(jsii.String(EnvTaskNames), jsii.String(strings.Join(names, ",")), nil)
	}
}
