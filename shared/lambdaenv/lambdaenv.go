// Package lambdaenv reads a Lambda function's configuration from its
// environment and wires the control plane from it. Resource names come
// from the stack through environment variables; none is hard-coded.
package lambdaenv

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/batchwork/batchwork/internal/faultenv"
	"github.com/batchwork/batchwork/internal/metrics"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/batchwork/batchwork/shared/awsconf"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/ddbwire"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/gcfloor"
	"github.com/batchwork/batchwork/shared/lineage"
	"github.com/batchwork/batchwork/shared/principal"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/sqswire"
	"github.com/batchwork/batchwork/shared/tuning"
)

// Config is what every Batchwork function needs.
type Config struct {
	Table, Bucket string
	// CountLinger batches commit counts (BatchCounts).
	CountLinger time.Duration
	Queues      control.Queues
	// Endpoint points the SDK at an emulator (AWS_ENDPOINT_URL).
	Endpoint string
	// OwnerLimits are the owners' concurrency limits.
	OwnerLimits control.OwnerLimits
	// OwnerMode maps IAM principals to owners (the api function).
	OwnerMode principal.Mode
	// Quotas are the owners' admission limits.
	Quotas control.Quotas
	// InputBuckets are the operator's allowed input buckets.
	InputBuckets []string
	// OutputBuckets are the operator's allowed output buckets.
	OutputBuckets []string
	// TaskFunctions are the Lambda functions lambda stages may invoke.
	TaskFunctions []string
	// ExecutorSizes are the executor sizes the stack deploys (EnvExecutorSizes).
	ExecutorSizes []spec.Size
	// TaskNames are the statically known task names (EnvTaskNames), and
	// CheckTaskNames whether submits are checked against them and the
	// published ones: set by the functions that submit (CheckTaskNames).
	TaskNames      []string
	CheckTaskNames bool
	// ExecPrograms are the statically known exec programs
	// (EnvExecPrograms), checked like TaskNames.
	ExecPrograms []string
	// EventBus is the bus events are published to (EnvEventBus); empty:
	// this process does not publish (the sweep of one that does will).
	EventBus string
	// Lineage is where OpenLineage run events go (shared/lineage: the
	// OPENLINEAGE_* variables); off unless OPENLINEAGE_URL is set.
	Lineage lineage.Config
	// Retention is how long ended jobs are kept (EnvRetentionDays); zero:
	// kept.
	Retention time.Duration
}

// FromEnv reads the configuration and reports every missing variable.
func FromEnv() (Config, error) {
	c := Config{
		Table: os.Getenv("BATCHWORK_TABLE"), Bucket: os.Getenv("BATCHWORK_BUCKET"),
		Queues: control.Queues{
			High: os.Getenv("BATCHWORK_QUEUE_HIGH"), Normal: os.Getenv("BATCHWORK_QUEUE_NORMAL"),
			Low: os.Getenv("BATCHWORK_QUEUE_LOW"), DLQ: os.Getenv("BATCHWORK_DLQ"),
			Timer: os.Getenv(EnvQueueTimer),
		},
		Endpoint: os.Getenv("AWS_ENDPOINT_URL"),
		EventBus: os.Getenv(EnvEventBus),
	}
	lc, err := lineage.ConfigFromEnv(os.Getenv)
	if err != nil {
		return c, err
	}
	c.Lineage = lc
	limits, err := control.ParseOwnerLimits(os.Getenv(EnvOwnerMaxConcurrency))
	if err != nil {
		return c, fmt.Errorf("%s: %w", EnvOwnerMaxConcurrency, err)
	}
	c.OwnerLimits = limits
	if c.OwnerMode, err = principal.ParseMode(os.Getenv(EnvOwnerMode)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvOwnerMode, err)
	}
	if c.Quotas, err = QuotasFromEnv(os.Getenv); err != nil {
		return c, err
	}
	if c.InputBuckets, err = control.ParseInputBuckets(os.Getenv(EnvInputBuckets)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvInputBuckets, err)
	}
	if c.OutputBuckets, err = control.ParseInputBuckets(os.Getenv(EnvOutputBuckets)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvOutputBuckets, err)
	}
	if c.TaskNames, err = control.ParseTaskNames(os.Getenv(EnvTaskNames)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvTaskNames, err)
	}
	if c.TaskFunctions, err = control.ParseTaskFunctions(os.Getenv(EnvTaskFunctions)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvTaskFunctions, err)
	}
	if c.ExecPrograms, err = control.ParsePrograms(os.Getenv(EnvExecPrograms)); err != nil {
		return c, fmt.Errorf("%s: %w", EnvExecPrograms, err)
	}
	if c.ExecutorSizes, err = control.ParseExecutorSizes(os.Getenv(EnvExecutorSizes)); err != nil { // executorsizes.go
		return c, fmt.Errorf("%s: %w", EnvExecutorSizes, err)
	}
	if c.Queues.Sized, err = control.ParseSizedQueues(os.Getenv(EnvQueueSized)); err != nil { // executorsizes.go
		return c, fmt.Errorf("%s: %w", EnvQueueSized, err)
	}
	if c.Retention, err = RetentionFromEnv(os.Getenv); err != nil { // retention.go
		return c, err
	}
	return c, c.Validate()
}

// QuotasFromEnv reads the owners' quotas through getenv; an error names
// the variable.
func QuotasFromEnv(getenv func(string) string) (control.Quotas, error) {
	var q control.Quotas
	for _, v := range []struct {
		name string
		to   *control.OwnerLimits
	}{{EnvOwnerMaxActiveJobs, &q.ActiveJobs}, {EnvOwnerMaxTasks, &q.Tasks}, {EnvOwnerMaxSchedules, &q.Schedules}} {
		l, err := control.ParseOwnerQuota(getenv(v.name))
		if err != nil {
			return q, fmt.Errorf("%s: %w", v.name, err)
		}
		*v.to = l
	}
	q.HighPriority = control.ParseHighPriorityOwners(getenv(EnvHighPriorityOwners))
	return q, nil
}

// Validate reports every missing setting at once.
func (c Config) Validate() error {
	var missing []string
	for name, v := range map[string]string{
		"BATCHWORK_TABLE": c.Table, "BATCHWORK_BUCKET": c.Bucket, "BATCHWORK_QUEUE_HIGH": c.Queues.High,
		"BATCHWORK_QUEUE_NORMAL": c.Queues.Normal, "BATCHWORK_QUEUE_LOW": c.Queues.Low, "BATCHWORK_DLQ": c.Queues.DLQ,
	} {
		if v == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing environment variables: %s", strings.Join(missing, ", "))
	}
	return nil
}

// Wired holds the adapters and the control plane.
type Wired struct {
	Service *control.Service
	Blob    *blob.Store
	Queue   *queue.Queue
	Log     *slog.Logger
	// Faults is the fault injector BATCHWORK_FAULTS asked for; it
	// injects nothing in a binary built without the faults tag.
	Faults faultenv.Injector
	// OwnerMode is the configuration's (the api function maps owners).
	OwnerMode principal.Mode
	// AWS is the configuration the adapters use, for clients built later
	// (the executor's Lambda client, for lambda stages).
	AWS aws.Config
	// Metrics aggregates Batchwork's own metrics, also recorded by Service
	// (metrics.EnvStack set), or is nil. Mains flush it at the end of
	// each invocation; long-running hosts run it (metrics.Recorder.Run).
	Metrics *metrics.Recorder
}

// Wire builds one aws.Config and the adapters over it.
func Wire(ctx context.Context, c Config) (Wired, error) {
	cfg, err := awsconf.Load(ctx, c.Endpoint)
	if err != nil {
		return Wired{}, err
	}
	awsconf.Harden(&cfg)
	gcfloor.Set() // a function's live heap is small
	// Fault injection for chaos runs (BATCHWORK_FAULTS), compiled in
	// only with the faults tag; a deployment's functions are built
	// without it and refuse the setting.
	inj, err := faultenv.FromEnv()
	if err != nil {
		return Wired{}, err
	}
	inj.Install(&cfg)
	// Each job's AWS requests, counted as they are made (shared/cost).
	m := control.NewMeter()
	m.Install(&cfg)
	// Stderr, like the local runner: on Lambda and Fargate both streams
	// reach the logs, and locally one stream holds every process's lines.
	log, err := NewLogger(os.Stderr)
	if err != nil {
		return Wired{}, err
	}
	// Spans go where the OTEL_* variables say, nowhere by default
	// (shared/tracing); each invocation's are flushed before it returns.
	if err := setupTracing(ctx, log); err != nil {
		return Wired{}, err
	}
	b := blob.New(s3.NewFromConfig(cfg, awsconf.S3Options(cfg)), c.Bucket)
	// The lean client (shared/sqswire) unless BATCHWORK_SQS_CLIENT=sdk.
	sq, err := sqswire.ForQueues(cfg, os.Getenv(sqswire.EnvClient))
	if err != nil {
		return Wired{}, err
	}
	q := queue.New(sq)
	// The lean client (shared/ddbwire) unless BATCHWORK_DYNAMO_CLIENT=sdk.
	db, err := ddbwire.ForStore(cfg, os.Getenv(ddbwire.EnvClient))
	if err != nil {
		return Wired{}, err
	}
	store := dynamo.New(db, c.Table)
	store.JobSetRetention(c.Retention) // records of a job that ends expire
	svc := control.New(control.Config{Queues: c.Queues, OwnerLimits: c.OwnerLimits, Quotas: c.Quotas, InputBuckets: c.InputBuckets, OutputBuckets: c.OutputBuckets,
		CheckTaskNames: c.CheckTaskNames, StaticTaskNames: c.TaskNames, TaskFunctions: c.TaskFunctions, ExecutorSizes: c.ExecutorSizes,
		StaticPrograms: c.ExecPrograms, Retention: c.Retention, CountLinger: c.CountLinger, Meter: m}, store, q, b, log)
	var sinks []events.Sink
	if c.Lineage.Enabled() && c.EventBus != "" {
		// Lineage waits in the event outbox for the functions that publish
		// events (all of them, in the stack), so that every publisher of a
		// record waits for the same destinations before deleting it.
		sinks = append(sinks, lineage.NewSink(c.Lineage, c.Table, store, b, log))
	}
	var bus events.Bus
	if c.EventBus != "" {
		bus = eventbridge.NewFromConfig(cfg)
	}
	if bus != nil || len(sinks) > 0 {
		svc.Events = events.NewPublisher(bus, c.EventBus, store, sinks...)
	}
	rec := metrics.FromEnv(os.Getenv)
	if rec != nil {
		svc.Metrics = rec // never a nil *Recorder in the interface
	}
	return Wired{Service: svc, Blob: b, Queue: q, Log: log, Faults: inj, OwnerMode: c.OwnerMode, AWS: cfg, Metrics: rec}, nil
}

// Option adjusts the configuration FromEnv read, for one function.
type Option func(*Config)

// BatchCounts is the option of the executors: their commits' counts go
// in batches (control.Config.CountLinger), written before the messages
// are deleted. Never for a function that answers a commit over the API:
// it may freeze, its counts unwritten, once it has answered.
func BatchCounts(c *Config) { c.CountLinger = tuning.CountLinger }

// CheckTaskNames is the option of the functions that submit jobs (api,
// sweep): a stage naming a task no executor runs is rejected at submit.
func CheckTaskNames(c *Config) { c.CheckTaskNames = true }

// Must is for mains: it exits with the error when wiring fails, since a
// function without configuration cannot serve anything.
func Must(ctx context.Context, opts ...Option) Wired {
	c, err := FromEnv()
	for _, o := range opts {
		o(&c)
	}
	if err == nil {
		var w Wired
		if w, err = Wire(ctx, c); err == nil {
			return w
		}
	}
	fmt.Fprintln(os.Stderr, "batchwork:", err)
	os.Exit(1)
	return Wired{}
}
