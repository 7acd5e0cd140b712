// Package control is Batchwork's control plane: submit, claim, heartbeat,
// commit, fail, status and sweep. The Lambda mains in functions/ and the
// local runner call these same methods.
package control

import (
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/control/jobid"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/control/readside"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/control/sweep"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/spec"
)

// DefaultSegmentTasks is a stage's materialization segment by default:
// what one call queues with the default chunks (100 of 100 tasks), so a
// stage one call can queue is one chain, as it always was.
const DefaultSegmentTasks = 10_000

// Config holds the control plane's timings. Zero values take defaults.
type Config struct {
	Queues Queues
	// StartGrace is how long the sweep waits before finishing a step that
	// its starter should have finished (starting a root stage,
	// materializing, unblocking downstream stages).
	StartGrace time.Duration
	// CheckEvery is how often the sweep re-checks a running stage.
	CheckEvery time.Duration
	// FollowUpGrace is how long after a commit that emptied a counter
	// shard the sweep waits before doing the stage's follow-up itself
	// (completing it, its manifest, the stages after it), in case the
	// committer died before doing it.
	FollowUpGrace time.Duration
	// CountLinger, when set, batches this process's commit counts: a
	// commit returns once its task is committed, and its count goes with
	// the others of its counter within this long (tasks/countbatch.go). Zero:
	// every commit counts before it returns (processes that cannot flush
	// after they answer).
	CountLinger time.Duration
	// Meter, when set, is this process's per-job AWS request counts (its
	// middleware installed on the clients the store, queue and blob use):
	// each commit's count carries its job's counts to the stage's counter
	// shards, where the job's status sums them (shared/cost).
	Meter *meter.Meter
	// StuckAfter is how long a READY task may wait unclaimed before the
	// sweep sends it a fresh message, in case its message was lost.
	StuckAfter time.Duration
	IdemTTL    time.Duration
	// SweepLimit bounds the records one sweep run looks at per index shard.
	SweepLimit int
	// ChunkTasks and ChunksPerCall bound materialization: a stage's tasks
	// are written and sent ChunkTasks at a time, and one call (a commit
	// that completed the upstream stage, or a sweep run) does at most
	// ChunksPerCall chunks before leaving the rest to the next sweep, so a
	// 100,000-task stage never holds one handler for minutes. Each chunk
	// recorded also pushes the stage's sweep check back by StartGrace, so
	// small chunks are the materializer's heartbeat: the sweep repeats a
	// chunk only when no chunk was recorded for a whole grace period.
	ChunkTasks    int
	ChunksPerCall int
	// SegmentTasks splits a larger stage's materialization into segments
	// of that many tasks, each queued by its own chain at once (a relay
	// each on the timer queue; SegmentWorkers of them in the calling
	// process), so that queueing a million tasks is bounded by DynamoDB
	// and SQS rather than by one loop (stages/segments.go). Zero is
	// DefaultSegmentTasks, what one call queues with the default chunks;
	// SegmentWorkers zero is 4.
	SegmentTasks, SegmentWorkers int
	// OwnerLimits caps each owner's running tasks across its jobs (see
	// limits.go). Every process that claims, commits, fails or sweeps
	// must have the same limits: one without them neither takes nor
	// frees owner slots (a slot left behind is reaped, later).
	OwnerLimits OwnerLimits
	// Quotas are the owners' admission limits (admission/quotas.go).
	Quotas Quotas
	// InputBuckets are the buckets besides the data bucket that a spec's
	// input prefix may name (ParseInputBuckets; admission/inputs.go); the operator
	// grants the roles read access to the same buckets. Empty: inputs come
	// from the data bucket only. Every process that submits (the API, the
	// sweep's schedule firings) must have the same list.
	InputBuckets []string
	// OutputBuckets are the buckets besides the data bucket that a job's
	// output folder may name, under the owner's key (stages/publish.go); the
	// operator grants the roles that end jobs write access to them. Every
	// process that submits must have the same list.
	OutputBuckets []string
	// InputsEndpoint, when set, is the S3 endpoint WhoAmI tells callers to
	// upload their inputs through (the local runner's emulator).
	InputsEndpoint string
	// TaskFunctions are the Lambda functions (names or ARNs) that lambda
	// stages may invoke (ParseTaskFunctions; admission/taskfunctions.go); the
	// operator grants the executor roles lambda:InvokeFunction on them.
	// Empty: none. Every process that submits must have the same list.
	TaskFunctions []string
	// ExecutorSizes are the executor memory sizes this installation
	// deploys (lambdaenv.EnvExecutorSizes, from the construct's
	// ExecutorSizes); empty means the default size only. Submit refuses a
	// stage asking for any other (admission/memory.go).
	ExecutorSizes []spec.Size
	// CheckTaskNames makes Submit and CreateSchedule reject a stage whose
	// task is neither in StaticTaskNames nor published by an executor
	// (admission/tasknames.go). The processes that submit (the API, the sweep, the
	// local runner) set it.
	CheckTaskNames bool
	// StaticTaskNames are task names known without being published: the
	// deployed Lambda executor's, which the construct lists at deploy
	// (lambdaenv.EnvTaskNames).
	StaticTaskNames []string
	// StaticPrograms are exec programs known without being published:
	// those the deployed Fargate image installs, which the construct
	// lists at deploy (lambdaenv.EnvExecPrograms), since the Fargate
	// service scales from zero and publishes only once it runs
	// (admission/programs.go).
	StaticPrograms []string
	// JobStateTTL is how long this process trusts a job's state it read
	// (jobstate.go): default DefaultJobStateTTL; negative reads it for
	// every claim and check.
	JobStateTTL time.Duration
	// Retention, when positive, is how long the installation keeps ended
	// jobs: their objects under jobs/ expire that long after they were
	// written (the bucket's lifecycle rule), so a job submitted without a
	// deadline gets the longest (spec.MaxDeadline) and none runs long
	// enough to lose its own objects (admission/deadline.go). Every process that
	// submits must have the same.
	Retention time.Duration
	// ManifestPageSize is how many outputs a manifest page holds; zero:
	// blob.ManifestPageSize. Tests page small stages with it.
	ManifestPageSize int
	// Logs is where JobLogs reads jobs' log lines (logs.go): CloudWatch
	// Logs for the api function, the log file for the local runner; nil:
	// this installation cannot read them.
	Logs logs.Source
}

func (c Config) withDefaults() Config {
	if c.StartGrace == 0 {
		c.StartGrace = 30 * time.Second
	}
	if c.CheckEvery == 0 {
		c.CheckEvery = time.Minute
	}
	if c.StuckAfter == 0 {
		c.StuckAfter = 5 * time.Minute
	}
	if c.FollowUpGrace == 0 {
		c.FollowUpGrace = 5 * time.Second
	}
	// Never later than the stage's own next check would have been.
	c.FollowUpGrace = min(c.FollowUpGrace, c.CheckEvery)
	if c.IdemTTL == 0 {
		c.IdemTTL = 30 * 24 * time.Hour
	}
	if c.SweepLimit == 0 {
		c.SweepLimit = 50
	}
	if c.ChunkTasks == 0 {
		c.ChunkTasks = 100
	}
	if c.ChunksPerCall == 0 {
		c.ChunksPerCall = 100
	}
	if c.SegmentTasks == 0 {
		c.SegmentTasks = DefaultSegmentTasks
	}
	if c.SegmentWorkers == 0 {
		c.SegmentWorkers = 4
	}
	switch {
	case c.JobStateTTL == 0:
		c.JobStateTTL = DefaultJobStateTTL
	case c.JobStateTTL < 0:
		c.JobStateTTL = 0
	}
	return c
}

// Service is the control plane: the capabilities built from one Config
// over one kernel. It embeds them, so their routes are its own methods
// under the names its callers use. It declares a method only where
// embedding cannot promote one: two capabilities have the same name
// (Sweep), a route answers more than its capability does (Cancel and
// Redrive answer with the status, SetLogSource keeps the Config's copy),
// the stage lifecycle shares its type's name with the task lifecycle's
// (OutputsURI, MaterializeRelay), or a route spans two capabilities
// (FireTimers, Submit).
type Service struct {
	// Kernel holds the ports, clock and caches every capability shares,
	// and its exported fields (Now, Jitter, Sleep, Metrics, Events) are
	// the service's. Embedded here, one level above the capabilities'
	// own, so its methods and fields are the ones the service promotes.
	*kernel.Kernel

	// The task lifecycle (claim, heartbeat, commit, fail, checkpoints,
	// splits), its speculative copies and its judge of executors killed
	// for memory (tasklife.go).
	*tasks.Lifecycle
	*tasks.Copies
	*tasks.Kills
	// Admission: submit, identity, the task catalog (admission.go).
	*admission.Admitter
	// Operations on submitted jobs: cancel, redrive, rerun, deletion
	// (operations.go).
	*operations.Operator
	// The read routes: status, lists, timeline, outputs, logs (reads.go).
	*readside.Reader
	// The schedule routes and their firings (schedules.go).
	*schedules.Firer

	cfg   Config
	store Store
	queue Queue
	blob  Blob
	log   *slog.Logger

	// NewID is injected so tests control job ids.
	NewID func() string

	// DeleteStepHook, when set, is called after each step of a job's
	// deletion (operations/jobdelete.go); an error stops the deletion there, as a
	// crash would. For tests.
	DeleteStepHook func(job, step string) error

	// Catalog is where executors publish their task names and programs,
	// and submits look them up (admission/tasknames.go, admission/programs.go): the store,
	// unless a test puts another in; nil keeps none.
	Catalog TaskCatalog

	// stages runs stages from start to completion and publishes their
	// job's outputs (stagelife.go); not embedded, as its type's name is
	// the task lifecycle's too.
	stages *stages.Lifecycle

	// sweeper runs the sweep (sweep.go).
	sweeper *sweep.Sweeper
}

// New returns a control plane service.
func New(cfg Config, store Store, q Queue, b Blob, log *slog.Logger) *Service {
	cfg = cfg.withDefaults()
	k := kernel.New(kernel.Config{
		Queues:      cfg.Queues,
		StuckAfter:  cfg.StuckAfter,
		OwnerLimits: cfg.OwnerLimits,
		JobStateTTL: cfg.JobStateTTL,
	}, store, q, b, log)
	s := &Service{
		Kernel:  k,
		Catalog: store,
		cfg:     cfg, store: store, queue: q, blob: b, log: log,
		NewID: NewJobID,
	}
	s.stages = stages.New(stages.Config{
		Queues:           cfg.Queues,
		StartGrace:       cfg.StartGrace,
		CheckEvery:       cfg.CheckEvery,
		StuckAfter:       cfg.StuckAfter,
		ChunkTasks:       cfg.ChunkTasks,
		ChunksPerCall:    cfg.ChunksPerCall,
		SegmentTasks:     cfg.SegmentTasks,
		SegmentWorkers:   cfg.SegmentWorkers,
		ManifestPageSize: cfg.ManifestPageSize,
		OutputBuckets:    cfg.OutputBuckets,
		TaskQuota:        cfg.Quotas.Tasks,
	}, k, store, q, b, log)
	s.Lifecycle = tasks.New(tasks.Config{
		StuckAfter:    cfg.StuckAfter,
		FollowUpGrace: cfg.FollowUpGrace,
		CountLinger:   cfg.CountLinger,
		TaskQuota:     cfg.Quotas.Tasks,
		Meter:         cfg.Meter,
	}, k, store, q, b, s.stages, log)
	s.Admitter = admission.New(admission.Config{
		StartGrace: cfg.StartGrace, IdemTTL: cfg.IdemTTL, Quotas: cfg.Quotas,
		InputBuckets: cfg.InputBuckets, OutputBuckets: cfg.OutputBuckets, InputsEndpoint: cfg.InputsEndpoint,
		TaskFunctions: cfg.TaskFunctions, ExecutorSizes: cfg.ExecutorSizes,
		CheckTaskNames: cfg.CheckTaskNames, StaticTaskNames: cfg.StaticTaskNames, StaticPrograms: cfg.StaticPrograms,
		Retention: cfg.Retention,
	}, k, s.stages, store, b, func() TaskCatalog { return s.Catalog }, func() string { return s.NewID() }, log)
	s.Operator = operations.New(operations.Config{
		StartGrace: cfg.StartGrace, CheckEvery: cfg.CheckEvery, StuckAfter: cfg.StuckAfter,
		JobStateTTL: cfg.JobStateTTL, Retention: cfg.Retention,
	}, k, s.stages, s.Lifecycle, s.Admitter, store, q, b, func() string { return s.NewID() },
		func(job, step string) error {
			if s.DeleteStepHook == nil {
				return nil
			}
			return s.DeleteStepHook(job, step)
		}, log)
	s.Reader = readside.New(readside.Config{Logs: cfg.Logs}, store, b, k, func() time.Time { return s.Now() }, log)
	s.Firer = schedules.New(schedules.Config{ScheduleQuota: cfg.Quotas.Schedules, TimerQueue: cfg.Queues.Timer},
		store, q, firingAdmission{s}, func() time.Time { return s.Now() }, log)
	s.sweeper = sweep.New(sweep.Config{
		StartGrace: cfg.StartGrace, CheckEvery: cfg.CheckEvery, SweepLimit: cfg.SweepLimit,
		Retention: cfg.Retention, DLQ: cfg.Queues.DLQ,
	}, k, s.stages, s.Lifecycle, s.Operator, s.Firer, store, q, log)
	s.Copies, s.Kills = s.Lifecycle.Copies(), s.Lifecycle.Kills()
	return s
}

// NewJobID returns a job id that sorts by creation time.
func NewJobID() string { return jobid.New() }
