// Package operations is what an owner does to a job once it is
// submitted, and the sweep's share of it: cancel (of the job, or of one
// task: taskcancel.go), redrive (retrying a FAILED job in place), rerun
// (a new job reusing an ended one's committed stages), deleting a job or
// its data, and expiring ended jobs by the installation's retention. It
// stands on kernel, stages, tasks (a task's cancel is a failure) and
// admission (a rerun is a submission); the facade, control.Service,
// answers with the job's status where a route does.
package operations

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/admission"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/control/tasks"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what operations need of the control plane's configuration
// (control.Config documents each field).
type Config struct {
	StartGrace time.Duration
	CheckEvery time.Duration
	StuckAfter time.Duration
	// JobStateTTL is how long a process trusts a job's state it read: a
	// deletion lets it pass after the job's end (jobdelete.go).
	JobStateTTL time.Duration
	Retention   time.Duration
}

// Store is the calls operations make on the state store.
type Store interface {
	// Jobs.
	JobGet(context.Context, string) (domain.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error)
	JobMarkDataDeleted(ctx context.Context, id string, now time.Time) (time.Time, error)
	// Job deletion and retention.
	JobMarkDeleting(ctx context.Context, id, owner string, now time.Time) error
	JobDeleteRecords(ctx context.Context, job string, budget int) (deleted int, complete bool, err error)
	JobDeleteItem(ctx context.Context, job string) (int, error)
	JobPostponeExpiry(ctx context.Context, job, owner string, until time.Time) error
	// Redrives.
	JobRedrive(context.Context, dynamo.RedriveJobParams) error
	StageRedrive(ctx context.Context, job string, idx int, ev sm.Event, now, due time.Time) error
	TaskRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int, now, notBefore, due time.Time) error
	TaskRaiseAttempts(ctx context.Context, ref domain.TaskRef, budget, gen int) error
	TaskMarkRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int) error
	// Stages and tasks.
	StageList(context.Context, string) ([]domain.Stage, error)
	StageGet(context.Context, string, int) (domain.Stage, error)
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
	TaskListStage(ctx context.Context, job string, stage, total int) ([]domain.Task, error)
	// The sweep's due index.
	DueSet(context.Context, dynamo.DueItem, time.Time) error
}

// Queue is the call operations make on the queues: a redriven stage's
// ready messages.
type Queue interface {
	SendBatch(ctx context.Context, url string, msgs []queue.Send) error
}

// Blob is the call operations make on S3: deleting a job's objects.
type Blob interface {
	DeletePrefix(ctx context.Context, prefix string, maxPages int) (blob.DeleteResult, error)
}

var (
	_ Store = kernel.Store(nil)
	_ Queue = kernel.Queue(nil)
	_ Blob  = kernel.Blob(nil)
)

// Operator carries out the owners' operations on their jobs.
type Operator struct {
	// Kernel is the control plane's, shared: its clock, sleep, caches and
	// job state.
	*kernel.Kernel

	cfg    Config
	store  Store
	queue  Queue
	blob   Blob
	stages *stages.Lifecycle
	tasks  *tasks.Lifecycle
	admit  *admission.Admitter
	log    *slog.Logger

	// newID names a rerun's idempotency key when its request has none;
	// stepHook, if set, is called after each step of a job's deletion.
	// Both read the facade's fields, which tests replace after New
	// (control.Service.NewID, DeleteStepHook).
	newID    func() string
	stepHook func(job, step string) error
}

// New returns an operator on k that drives stages with lc, fails the
// tasks its owners cancel with tl and submits reruns with adm; cfg has
// its defaults already.
func New(cfg Config, k *kernel.Kernel, lc *stages.Lifecycle, tl *tasks.Lifecycle, adm *admission.Admitter, store Store, q Queue, b Blob,
	newID func() string, stepHook func(job, step string) error, log *slog.Logger) *Operator {
	return &Operator{Kernel: k, cfg: cfg, store: store, queue: q, blob: b, stages: lc, tasks: tl, admit: adm, log: log,
		newID: newID, stepHook: stepHook}
}
