// Package admission is the control plane's admission of jobs: a
// submission's checks (owner, idempotency key, priority, task names,
// exec programs, executor sizes, Lambda functions, inputs, output folder,
// quotas), the job's record and the start of its root stages, and the
// catalog of task names and programs executors publish. It stands on
// kernel and stages; operations (a rerun's submission) and the facade,
// control.Service, call it.
package admission

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what admission needs of the control plane's configuration
// (control.Config documents each field).
type Config struct {
	// StartGrace is when the sweep looks at a root stage its submitter
	// should have started.
	StartGrace     time.Duration
	IdemTTL        time.Duration
	Quotas         Quotas
	InputBuckets   []string
	OutputBuckets  []string
	InputsEndpoint string
	TaskFunctions  []string
	ExecutorSizes  []spec.Size
	CheckTaskNames bool
	// StaticTaskNames and StaticPrograms are known without being
	// published (tasknames.go, programs.go).
	StaticTaskNames []string
	StaticPrograms  []string
	// Retention, when positive, gives a job without a deadline the
	// longest (deadline.go).
	Retention time.Duration
}

// Store is the calls admission makes on the state store: the job's
// record, its start (startat.go), and the quota counters a refusal names.
type Store interface {
	JobCreate(context.Context, dynamo.CreateJobParams) (string, bool, error)
	JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error)
	JobStart(context.Context, dynamo.JobStartParams) error
	JobState(context.Context, string) (sm.JobState, error)
	JobGet(context.Context, string) (domain.Job, error)
	OwnerQuotaUse(ctx context.Context, owner string) (dynamo.QuotaUse, error)
}

// Blob is the call admission makes on S3: the data bucket's name, which
// the owner's inputs area is in.
type Blob interface {
	Bucket() string
}

var (
	_ Store = kernel.Store(nil)
	_ Blob  = kernel.Blob(nil)
)

// Admitter admits jobs.
type Admitter struct {
	// Kernel is the control plane's, shared: its clock and job caches.
	*kernel.Kernel

	cfg    Config
	store  Store
	blob   Blob
	stages *stages.Lifecycle
	log    *slog.Logger

	// catalog and newID read the facade's fields, which tests replace
	// after New (control.Service.Catalog, NewID).
	catalog func() kernel.TaskCatalog
	newID   func() string

	// names is this process's copy of the catalog (tasknames.go).
	names taskNameCache
}

// New returns an admitter on k that starts root stages with lc; catalog
// is where executors publish their task names and programs (nil: none),
// newID names a new job. cfg has its defaults already.
func New(cfg Config, k *kernel.Kernel, lc *stages.Lifecycle, store Store, b Blob,
	catalog func() kernel.TaskCatalog, newID func() string, log *slog.Logger) *Admitter {
	return &Admitter{Kernel: k, cfg: cfg, store: store, blob: b, stages: lc, log: log, catalog: catalog, newID: newID}
}
