// Package sweep is the control plane's repair walk: one run looks at the
// records the due index says are due and repairs what SQS cannot (lost
// messages, expired claims, long backoffs, steps a crash interrupted,
// dead letters, deadlines and retention). It decides nothing itself: each
// repair is the capability's own (tasks, stages, operations, schedules),
// and the sweep is the one caller that reaches them all, so it stands
// above every one of them.
package sweep

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/operations"
	"github.com/batchwork/batchwork/shared/control/schedules"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what the sweep needs of the control plane's configuration
// (control.Config documents each field).
type Config struct {
	StartGrace time.Duration
	CheckEvery time.Duration
	SweepLimit int
	Retention  time.Duration
	// DLQ is the dead-letter queue's URL; empty: no dead letters to read.
	DLQ string
}

// Store is the calls the sweep makes on the state store.
type Store interface {
	// The due index.
	DueList(ctx context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error)
	// DueScan reads the whole index in one request when it is small
	// (whole), else nothing. Whole with an error: the records it could
	// read, and why the others could not be.
	DueScan(ctx context.Context, now time.Time, limit int) (items []dynamo.DueItem, whole bool, err error)
	DueSet(context.Context, dynamo.DueItem, time.Time) error
	// DueRemoveDone takes out of the index, together, the markers of
	// completed stages that DueList or DueScan found
	// (dynamo/readydonebatch.go).
	DueRemoveDone(context.Context) error
	// Jobs, stages and tasks.
	JobGet(context.Context, string) (domain.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	StageGet(context.Context, string, int) (domain.Stage, error)
	StageList(context.Context, string) ([]domain.Stage, error)
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
}

// Queue is the calls the sweep makes on the queues: reading and deleting
// dead letters.
type Queue interface {
	Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error)
	DeleteBatch(ctx context.Context, url string, receipts []string) error
}

var (
	_ Store = kernel.Store(nil)
	_ Queue = kernel.Queue(nil)
)

// Sweeper runs the sweep.
type Sweeper struct {
	// Kernel is the control plane's, shared: its clock, caches, job
	// state, events and metrics.
	*kernel.Kernel

	cfg    Config
	store  Store
	queue  Queue
	stages *stages.Lifecycle
	tasks  *tasks.Lifecycle
	ops    *operations.Operator
	firer  *schedules.Firer
	log    *slog.Logger
}

// New returns a sweeper on k that repairs through the capabilities given;
// cfg has its defaults already.
func New(cfg Config, k *kernel.Kernel, lc *stages.Lifecycle, tl *tasks.Lifecycle, ops *operations.Operator, firer *schedules.Firer,
	store Store, q Queue, log *slog.Logger) *Sweeper {
	return &Sweeper{Kernel: k, cfg: cfg, store: store, queue: q, stages: lc, tasks: tl, ops: ops, firer: firer, log: log}
}
