// Package host runs an executor registry as a process: the Lambda SQS
// handler or the long-polling pool of slots (Fargate, local), both
// configured from the environment (shared/lambdaenv). shared/batchwork's
// Main chooses between them; the logic lives here so that every executor
// binary, the repository's and its users', runs the same host.
package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/batchwork/batchwork/internal/executor"
	"github.com/batchwork/batchwork/internal/executor/execstage"
	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/internal/executor/procmem"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/lambdaenv"
	"github.com/batchwork/batchwork/shared/lambdatask"
	"github.com/batchwork/batchwork/shared/tracing"
	"github.com/batchwork/batchwork/shared/tuning"
)

// EnvSlots is the long-polling host's number of concurrent tasks
// (default 4).
const EnvSlots = "BATCHWORK_SLOTS"

// drain stays under ECS's longest stop timeout (120 s) so that tasks
// that finish in time commit before the container is killed.
const drain = 110 * time.Second

// Tasks is what a host runs: the registry the runner looks functions up
// in, and its names, published to the control plane at start.
type Tasks struct {
	Registry *executor.Registry
	Names    []string
}

// publisher is the control plane's task catalog (control.Service).
type publisher interface {
	PublishTaskNames(ctx context.Context, names []string) error
}

var _ publisher = (*control.Service)(nil)

// Publishing waits: how long a host tries to publish its task names
// before it takes work, and the first retry's delay (doubled up to
// maxPublishDelay).
const (
	publishWait     = 10 * time.Second
	publishDelay    = 250 * time.Millisecond
	maxPublishDelay = 30 * time.Second
)

// publish records names in the control plane's catalog, which submit
// checks specs against, retrying with backoff until it succeeds or ctx
// ends (its error then). A submit naming one of them is refused until it
// succeeds, so one failed request must not leave them unpublished until
// the next start. A control plane without a catalog checks nothing.
func publish(ctx context.Context, p publisher, log *slog.Logger, names []string, delay time.Duration) error {
	return retryPublish(ctx, log, "task names", names, delay, p.PublishTaskNames)
}

// retryPublish is publish for any of the catalog's lists: what names it
// in logs, and fn publishes (PublishTaskNames, PublishPrograms).
func retryPublish(ctx context.Context, log *slog.Logger, what string, names []string, delay time.Duration,
	fn func(context.Context, []string) error) error {
	for {
		err := fn(ctx, names)
		if err == nil || errors.Is(err, control.ErrNoTaskCatalog) {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		log.Warn("publish "+what+"; retrying", "err", err, "names", names, "retry_in", delay)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, maxPublishDelay)
	}
}

// Lambda runs the Lambda host: an SQS event source with partial batch
// failures. It exits the process with status 1 when the environment is
// incomplete, and otherwise does not return.
func Lambda(tasks Tasks) {
	if limit, ok := SoftMemoryLimit(os.Getenv); ok {
		debug.SetMemoryLimit(limit)
	}
	w := lambdaenv.Must(context.Background(), lambdaenv.BatchCounts)
	// Every cold start publishes (a read when the names are known), so a
	// failure here is retried by the next one; the init phase has 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), publishWait/2)
	if err := publish(ctx, w.Service, w.Log, tasks.Names, publishDelay); err != nil {
		w.Log.Error("publish task names: giving up until the next cold start", "err", err, "tasks", tasks.Names)
	}
	cancel()
	lambda.Start(flushAfter(w.Metrics, LambdaHandler(w, tasks.Registry).Handle)) // metrics.go
}

// SoftMemoryLimit is the Go runtime's soft memory limit for this
// function's memory (tuning.SoftMemoryLimit: the split and output caps are
// sized for live bytes, and without it the heap may grow to twice them),
// unless an operator set GOMEMLIMIT or this is not Lambda.
func SoftMemoryLimit(getenv func(string) string) (int64, bool) {
	mb, err := strconv.ParseInt(getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb <= 0 || getenv("GOMEMLIMIT") != "" {
		return 0, false
	}
	return tuning.SoftMemoryLimit(mb), true
}

// LambdaHandler builds the SQS handler running reg's functions. SQS
// events name their queue by ARN; the URLs it needs for visibility
// changes come from the environment, keyed by queue name.
func LambdaHandler(w lambdaenv.Wired, reg *executor.Registry) *feed.LambdaHandler {
	urls := map[string]string{}
	all := []string{os.Getenv(lambdaenv.EnvQueueHigh), os.Getenv(lambdaenv.EnvQueueNormal), os.Getenv(lambdaenv.EnvQueueLow)}
	if sized, err := control.ParseSizedQueues(os.Getenv(lambdaenv.EnvQueueSized)); err == nil { // a sized executor's own queue
		for _, u := range sized {
			all = append(all, u)
		}
	}
	for _, u := range all {
		urls[u[strings.LastIndex(u, "/")+1:]] = u
	}
	// The size the construct deployed this executor as (executor/procmem).
	mem, err := procmem.SizeFromEnv()
	if err != nil {
		w.Log.Error("executor size: running tasks of any size", "err", err)
	}
	return &feed.LambdaHandler{
		// Lambda stages run here too; exec stages never do (no ExecDir).
		Handler: &executor.Runner{CP: w.Service, Blob: w.Blob, Registry: reg, Log: w.Log, Lambda: lambdatask.NewInvoker(w.AWS),
			Memory: mem, MemoryLimit: procmem.LambdaLimit(os.Getenv), OnClaim: claimLatency(w.Metrics, nil)}, // metrics.go
		CP: w.Service, Queue: w.Queue, Log: w.Log, QueueURLs: urls,
	}
}

// Poll runs the long-polling host until ctx ends: executor slots fed by
// long polling the three ready queues, configured like the Lambda
// functions plus BATCHWORK_SLOTS. On ECS (ECS_AGENT_URI set) it protects
// its task from scale-in while a slot runs a task (protection.go). When
// ctx ends (SIGTERM: a scale-in or a deployment) it stops receiving and
// lets running tasks finish and commit for up to the drain time.
func Poll(ctx context.Context, tasks Tasks) error {
	cfg, err := lambdaenv.FromEnv()
	if err != nil {
		return err
	}
	slots, err := Slots(os.Getenv)
	if err != nil {
		return err
	}
	splitAfter, err := SplitAfter(os.Getenv) // splitafter.go
	if err != nil {
		return err
	}
	// Exec stages run programs from this directory only (executor/execstage).
	execDir, err := execstage.ExecDirFromEnv()
	if err != nil {
		return err
	}
	// Only tasks of its size, when the construct gave it one (executor/procmem).
	mem, err := procmem.SizeFromEnv()
	if err != nil {
		return err
	}
	lambdaenv.BatchCounts(&cfg)
	w, err := lambdaenv.Wire(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return err
	}
	// Before taking work, so a job submitted once this executor is running
	// is accepted; if the catalog cannot be written for a while, the
	// executor still runs the tasks it is sent and keeps trying.
	first, cancel := context.WithTimeout(ctx, publishWait)
	err = publish(first, w.Service, w.Log, tasks.Names, publishDelay)
	cancel()
	if err != nil {
		go publish(ctx, w.Service, w.Log, tasks.Names, maxPublishDelay)
	}
	// And the programs this host's exec stages can run, so that submit
	// accepts exec stages naming them (and refuses any other).
	programs, err := execstage.Programs(execDir)
	if err != nil {
		return err
	}
	if len(programs) > 0 {
		first, cancel := context.WithTimeout(ctx, publishWait)
		err = retryPublish(first, w.Log, "programs", programs, publishDelay, w.Service.PublishPrograms)
		cancel()
		if err != nil {
			go retryPublish(ctx, w.Log, "programs", programs, maxPublishDelay, w.Service.PublishPrograms)
		}
	}
	// A chaos run (BATCHWORK_FAULTS) sums every process's injected faults
	// from these lines; without faults nothing is logged.
	go w.Faults.ReportEvery(ctx, time.Second, func(c map[string]int) { w.Log.Info("faults injected", "counts", c) })
	p := &feed.Poller{
		Handler: &executor.Runner{CP: w.Service, Blob: w.Blob, Registry: tasks.Registry, Log: w.Log,
			ExecDir: execDir, Lambda: lambdatask.NewInvoker(w.AWS), Memory: mem, SplitAfter: splitAfter,
			// One line per attempt that starts: which executor ran what
			// is otherwise only in the task record, and only until the
			// next claim overwrites it.
			OnClaim: claimLatency(w.Metrics, func(c control.Claim, _ time.Time) {
				w.Log.Info("task claimed", "job_id", c.Task.Ref.Job, "stage", c.Task.Ref.Stage,
					"partition", c.Task.Ref.Partition, "task", c.Task.Ref.String(), "attempt", c.Task.Attempt,
					"executor_id", c.Task.Executor, "claimed_at", c.Task.Updated.UnixMilli())
			})},
		CP:         w.Service,
		Queue:      w.Queue,
		Queues:     cfg.Queues.Polled(mem), // its size's own queue, if it has one
		Slots:      slots,
		Visibility: tuning.ReceiveVisibility,
		Drain:      drain,
		Log:        w.Log,
	}
	// On ECS, a container running tasks is protected from scale-in.
	activity, stopProtection := startProtection(w.Log)
	defer stopProtection()
	p.Activity = activity
	// On ECS, the executor's id is its task's (ecsid.go), so an OOM kill
	// that ECS reports reaches its liveness record.
	if id, err := ecsExecutorID(ctx, os.Getenv, &http.Client{}); err != nil {
		w.Log.Warn("executor id from the task metadata; making one up", "err", err)
	} else {
		p.ExecutorID = id
	}
	w.Log.Info("executor running", "slots", slots, "tasks", tasks.Names, "exec_dir", execDir, "programs", programs)
	// Batchwork's metrics, written every few seconds and once more after
	// the drain (metrics.go).
	stopMetrics := runMetrics(w.Metrics)
	defer stopMetrics()
	defer tracing.Flush(context.WithoutCancel(ctx)) // the spans of the drained tasks
	return p.Run(ctx)
}

// Slots is the long-polling host's slot count from BATCHWORK_SLOTS.
func Slots(getenv func(string) string) (int, error) {
	s := getenv(EnvSlots)
	if s == "" {
		return 4, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%s=%q: want a positive whole number", EnvSlots, s)
	}
	return n, nil
}
