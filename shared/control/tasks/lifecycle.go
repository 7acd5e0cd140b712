// Package tasks is the control plane's task lifecycle: a task's claim
// (and a dead holder's takeover), its heartbeat, its commit and count,
// its failure, retry and tolerated failure, its checkpoints and their
// resumption, its dynamic split, the executors killed for memory whose
// claims end as out of memory, speculative copies, and the sweep's repair
// of one task. It stands on kernel and stages only; what it asks of the
// stage lifecycle is its Stages port, and the facade, control.Service,
// wires it.
package tasks

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/lru"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what the task lifecycle needs of the control plane's
// configuration (control.Config documents each field).
type Config struct {
	StuckAfter    time.Duration
	FollowUpGrace time.Duration
	// CountLinger: zero counts every commit before it returns.
	CountLinger time.Duration
	// TaskQuota caps the tasks each owner's job has, splits included
	// (control.Quotas.Tasks).
	TaskQuota kernel.OwnerLimits
	// Meter is this process's per-job request counts, which commits'
	// counts carry to the store (cost.go); nil counts nothing.
	Meter *meter.Meter
}

// Store is the calls the task lifecycle makes on the state store.
type Store interface {
	// Jobs.
	JobState(context.Context, string) (sm.JobState, error)
	// Stages and their completion counters.
	StageGet(context.Context, string, int) (domain.Stage, error)
	StageHurry(ctx context.Context, job string, stage int, due time.Time) error
	StageDurations(ctx context.Context, job string, stage, shards int) (domain.Durations, error)
	StageSetCopiesRunning(ctx context.Context, job string, idx, n int) error
	ShardLeft(ctx context.Context, job string, idx, shard int) (int, error)
	ShardEmptied(ctx context.Context, job string, stage, shard int) (all bool, err error)
	ShardAddCost(ctx context.Context, job string, stage, shard int, flush string, c cost.Counts) error
	ShardEnsureCounted(ctx context.Context, ref domain.TaskRef, shards int) (counted, shardDone bool, err error)
	ShardCountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error)
	// Tasks: claims fenced by their token and every way an attempt ends.
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
	TaskListStage(ctx context.Context, job string, stage, total int) ([]domain.Task, error)
	TaskClaim(context.Context, dynamo.ClaimParams) (domain.Task, error)
	TaskForgetClaim(ctx context.Context, ref domain.TaskRef, token string) error
	TaskHeartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	TaskCommit(context.Context, dynamo.CommitParams) (shardDone bool, err error)
	TaskRelease(context.Context, dynamo.ReleaseParams) (domain.Task, error)
	TaskFailTolerated(context.Context, dynamo.TolerateParams) (domain.Task, error)
	TaskCancel(context.Context, dynamo.TaskCancelParams) (domain.Task, error)
	TaskSweep(context.Context, dynamo.SweepTaskParams) error
	TaskTakeover(context.Context, dynamo.TakeoverParams) (domain.Task, error)
	TaskLoseForMemory(ctx context.Context, p dynamo.LostForMemoryParams) (domain.Task, error)
	TaskUnindex(context.Context, domain.Task) error
	TaskCheckpoint(context.Context, dynamo.CheckpointParams) error
	TaskContinue(context.Context, dynamo.ContinueParams) (domain.Task, error)
	TaskSplit(context.Context, dynamo.SplitTaskParams) (int, error)
	// Speculative copies.
	CopyRequest(ctx context.Context, ref domain.TaskRef, now time.Time) error
	CopyClaim(context.Context, dynamo.ClaimParams) (domain.Task, error)
	CopyHeartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	TaskDropClaim(context.Context, dynamo.DropParams) (domain.Task, error)
	// Attempt ends and the job's timeline.
	AttemptRecordEnd(context.Context, dynamo.AttemptEndParams) (bool, error)
	TimelineRecord(context.Context, domain.AttemptEnd) error
	// The sweep's due index.
	DueSet(context.Context, dynamo.DueItem, time.Time) error
	// Executors: liveness, memory and kills.
	ExecutorAlive(ctx context.Context, id string) (time.Time, error)
	ExecutorRenewMemory(ctx context.Context, id string, until time.Time, usedMiB, limitMiB int64) error
	ExecutorMarkKilled(ctx context.Context, id, reason string, now time.Time) error
}

// Queue is the call the task lifecycle makes on the queues: a split's
// new tasks and a speculative copy's message.
type Queue interface {
	SendBatch(ctx context.Context, url string, msgs []queue.Send) error
}

// Blob is the calls the task lifecycle makes on S3: a commit's check of
// its outputs and the tagging of a refused checkpoint's objects.
type Blob interface {
	Bucket() string
	List(ctx context.Context, bucket, prefix string) ([]split.Object, error)
	MarkUncommitted(ctx context.Context, prefix string) (int, error)
	// A skewed stage's plan (skewclaim.go).
	Get(ctx context.Context, key string) ([]byte, error)
}

// Stages is what the task lifecycle asks of the stage lifecycle
// (stages.Lifecycle): a stage's completion once its last task finished,
// and the job's failure with a task that failed for good.
type Stages interface {
	CheckStageComplete(ctx context.Context, job string, idx int) error
	FailJob(ctx context.Context, job string, idx int, reason string, gen int) error
}

var (
	_ Store = kernel.Store(nil)
	_ Queue = kernel.Queue(nil)
	_ Blob  = kernel.Blob(nil)
)

// Lifecycle claims, beats, commits and fails tasks, and repairs them for
// the sweep. Its speculative copies are Copies' and its executors killed
// for memory Kills': a task's path asks them where it meets theirs.
type Lifecycle struct {
	// Kernel is the control plane's, shared: its clock, caches and job
	// state are the ones every capability reads.
	*kernel.Kernel

	cfg    Config
	store  Store
	queue  Queue
	blob   Blob
	stages Stages
	log    *slog.Logger

	// counts batches commit counts (countbatch.go); nil without
	// Config.CountLinger.
	counts *countBatcher

	copies *Copies
	kills  *Kills

	skew skewPlans // skewclaim.go
}

// Copies runs speculative copies of a speculating stage's stragglers
// (speculation.go).
type Copies struct {
	*kernel.Kernel

	cfg   Config
	store Store
	queue Queue
	log   *slog.Logger

	// looks is when the sweep last listed a speculating stage's tasks
	// ("job/stage"; speculationlook.go).
	looks *lru.Cache[string, specLook]
}

// Kills judges executors killed for memory, so that their claims end as
// out of memory and retry one size up (oomkill.go).
type Kills struct {
	*kernel.Kernel

	cfg   Config
	store Store
	log   *slog.Logger
}

// New returns a task lifecycle on k; cfg has its defaults already.
func New(cfg Config, k *kernel.Kernel, store Store, q Queue, b Blob, st Stages, log *slog.Logger) *Lifecycle {
	s := &Lifecycle{
		Kernel: k, cfg: cfg, store: store, queue: q, blob: b, stages: st, log: log,
		copies: &Copies{Kernel: k, cfg: cfg, store: store, queue: q, log: log, looks: lru.New[string, specLook](kernel.ShardCacheSize)},
		kills:  &Kills{Kernel: k, cfg: cfg, store: store, log: log},
	}
	if cfg.CountLinger > 0 {
		s.counts = &countBatcher{svc: s, linger: cfg.CountLinger}
	}
	return s
}

// Copies is the lifecycle's speculative copies.
func (s *Lifecycle) Copies() *Copies { return s.copies }

// Kills is the lifecycle's judge of executors killed for memory.
func (s *Lifecycle) Kills() *Kills { return s.kills }
