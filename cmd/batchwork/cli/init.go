package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/batchwork/batchwork/cmd/batchwork/scaffold"
)

// initCommand is `batchwork init DIR`; package scaffold writes the project.
var initCommand = &command{name: "init", args: "DIR", summary: "create a new Go project for your own tasks: executor, job spec, CDK app, Makefile",
	help: `Creates DIR (which must not exist or be empty) holding a new Go module for your
own Batchwork tasks:

  main.go          your executor, with one example task (hello.upper)
  main_test.go     its unit test (batchwork.RunTask: no AWS needed)
  job.json         a job spec running it over data/sample.txt
  infra/main.go    a CDK app deploying Batchwork with your executor (cdk.json)
  Makefile         make dev (run job.json locally), make test, make deploy (cdk deploy)
  package.json     pins the CDK CLI the Makefile runs
  Dockerfile       the image for the Fargate executor, if you want one
  README.md

go.mod requires github.com/batchwork/batchwork at this command's version, and
lists this command as a tool (go tool batchwork, which make dev runs); go mod
tidy then fetches the dependencies. With -replace PATH it uses the Batchwork
checkout in PATH instead, starting from the checkout's requirements and go.sum,
so the project builds offline from the module cache the checkout filled.`,
	examples: []string{
		"batchwork init myjob && cd myjob && make dev",
		"batchwork init -module example.com/etl/nightly ./nightly",
		"batchwork init -replace ~/src/batchwork ./try",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.module, "module", "", "the new module's path (default: DIR's base name)")
		fs.StringVar(&o.replace, "replace", "", "use the Batchwork checkout in this directory (a replace directive) instead of a released version")
	},
	minArgs: 1, maxArgs: 1, run: runInit}

func runInit(ctx context.Context, a *app, args []string) int {
	dir := args[0]
	d, err := scaffold.New(dir, a.o.module, a.o.replace)
	if err == nil {
		err = scaffold.Write(dir, d)
	}
	var ue *scaffold.UsageError
	if errors.As(err, &ue) {
		return a.fail(&usageError{ue.Msg})
	}
	if err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(a.env.Stdout, "Created %s (module %s)\n", dir, d.Module)
	if d.NeedsTidy() {
		if err := scaffold.Tidy(ctx, dir); err != nil {
			return a.fail(err)
		}
	}
	fmt.Fprintf(a.env.Stdout, `
Next:
  cd %s
  make dev       # run job.json on your machine (emulated AWS), print the results
  make deploy    # deploy to your AWS account (cdk deploy; make bootstrap once first)
Your task is in main.go; README.md says more.
`, dir)
	return ExitOK
}
