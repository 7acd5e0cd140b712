// Package stages is the control plane's stage lifecycle: a stage's start,
// plan and materialization (and its relay through the timer queue), its
// completion, its manifests, a rerun's reused stages, the job's end, and
// the publishing of a job's outputs to its output folder. It stands on
// kernel only; the capabilities above it (tasks, admission, operations,
// the sweep) call it through the facade, control.Service.
package stages

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what the stage lifecycle needs of the control plane's
// configuration (control.Config documents each field).
type Config struct {
	Queues        kernel.Queues
	StartGrace    time.Duration
	CheckEvery    time.Duration
	StuckAfter    time.Duration
	ChunkTasks    int
	ChunksPerCall int
	// SegmentTasks and SegmentWorkers split a larger stage's
	// materialization into segments queued at once (segments.go).
	SegmentTasks, SegmentWorkers int
	// ManifestPageSize: zero is blob.ManifestPageSize.
	ManifestPageSize int
	OutputBuckets    []string
	// TaskQuota caps the tasks each owner's job plans (control.Quotas.Tasks).
	TaskQuota kernel.OwnerLimits
}

// Store is the calls the stage lifecycle makes on the state store.
type Store interface {
	// Jobs.
	JobState(context.Context, string) (sm.JobState, error)
	JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error)
	JobStartPublishing(ctx context.Context, id string, now time.Time) error
	// Stages.
	StageList(context.Context, string) ([]domain.Stage, error)
	StageGet(context.Context, string, int) (domain.Stage, error)
	StageTransition(context.Context, dynamo.StageTransitionParams) error
	StageSetPlan(ctx context.Context, job string, idx, total int) (domain.Stage, error)
	StageChargePlan(context.Context, dynamo.PlanChargeParams) error
	StageMarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error
	StageAdvanceEnqueued(ctx context.Context, job string, idx, from, to int, due time.Time) (bool, error)
	StageSetSegments(ctx context.Context, job string, idx, size int) (domain.Stage, error)
	StageAdvanceSegment(ctx context.Context, job string, idx, seg, from, to int, due time.Time) (bool, error)
	StageAdopt(ctx context.Context, job string, idx, total int) error
	StageAdoptTolerated(ctx context.Context, job string, idx, tolerated int) error
	StageProgress(context.Context, domain.Stage) (domain.Progress, error)
	ShardPut(ctx context.Context, job string, idx, total, shards int) error
	// Tasks.
	TaskPutMany(context.Context, []domain.Task, time.Time) error
	TaskListPage(context.Context, dynamo.TaskPageParams) (dynamo.TaskPage, error)
	// The sweep's due index.
	DueSet(context.Context, dynamo.DueItem, time.Time) error
}

// Queue is the call the stage lifecycle makes on the queues: sending a
// materialized chunk's ready messages and a relay.
type Queue interface {
	SendBatch(ctx context.Context, url string, msgs []queue.Send) error
}

// Blob is the calls the stage lifecycle makes on S3: plans, manifests,
// inputs and publishing.
type Blob interface {
	Bucket() string
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	List(ctx context.Context, bucket, prefix string) ([]split.Object, error)
	PinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error)
	PutIfAbsentIn(ctx context.Context, bucket, key string, body []byte) error
	CopyIfAbsent(ctx context.Context, srcKey, dstBucket, dstKey string) error
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
	ListPage(ctx context.Context, bucket, prefix, startAfter string) ([]string, bool, error)
}

var (
	_ Store = kernel.Store(nil)
	_ Queue = kernel.Queue(nil)
	_ Blob  = kernel.Blob(nil)
)

// Lifecycle runs stages from start to completion and ends their job.
type Lifecycle struct {
	// Kernel is the control plane's, shared: its clock, caches and job
	// state are the ones every capability reads.
	*kernel.Kernel

	cfg   Config
	store Store
	queue Queue
	blob  Blob
	log   *slog.Logger
}

// New returns a stage lifecycle on k; cfg has its defaults already.
func New(cfg Config, k *kernel.Kernel, store Store, q Queue, b Blob, log *slog.Logger) *Lifecycle {
	return &Lifecycle{Kernel: k, cfg: cfg, store: store, queue: q, blob: b, log: log}
}
