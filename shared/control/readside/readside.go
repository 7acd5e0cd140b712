// Package readside is what the control plane shows its callers of their
// jobs: status, job and task lists, the timeline, committed outputs, logs,
// rates and bad records. It only reads, except for the rate sample a
// status read may refresh, and nothing else in the control plane calls it.
package readside

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/logs"
	"github.com/batchwork/batchwork/shared/split"
)

// Config is what the read side needs of its installation.
type Config struct {
	// Logs is where JobLogs reads jobs' log lines (logs.go): CloudWatch
	// Logs for the api function, the log file for the local runner; nil:
	// this installation cannot read them.
	Logs logs.Source
}

// Store is the calls the read side makes on the state store: a subset of
// the control plane's store, grouped as it groups them.
type Store interface {
	// Jobs.
	JobListByOwner(context.Context, dynamo.ListJobsParams) ([]domain.JobSummary, string, error)
	// Stages.
	StageList(context.Context, string) ([]domain.Stage, error)
	StageStats(ctx context.Context, job string) ([]domain.StageStats, error)
	StagePutRateSample(ctx context.Context, job string, idx int, prev time.Time, smp domain.RateSample) (bool, error)
	StageBadRecordCounts(ctx context.Context, job string) (map[int]int64, error)
	// The timeline's stored events (attempt ends).
	TimelineEvents(ctx context.Context, job, after string, limit int) ([]dynamo.TimelineEvent, error)
	// Tasks and their attempt ends.
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
	TaskListPage(context.Context, dynamo.TaskPageParams) (dynamo.TaskPage, error)
	AttemptEnds(ctx context.Context, job string, stage, from, to int) ([]domain.AttemptEnd, error)
	// Concurrency slots.
	SlotHolders(ctx context.Context, m dynamo.SlotMap) (map[domain.TaskRef]time.Time, error)
}

// Blob is the calls the read side makes on the data bucket.
type Blob interface {
	Bucket() string
	Get(ctx context.Context, key string) ([]byte, error)
	List(ctx context.Context, bucket, prefix string) ([]split.Object, error)
	// PresignGet makes an output's time-limited GET URL.
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)
}

// Kernel is what the read side asks of the control plane's job records
// and limits: who owns a job, and which limits its tasks run under.
type Kernel interface {
	// OwnedJob reads a job for its owner; another owner's job, or one
	// being deleted, is domain.ErrNotFound, so its existence does not leak.
	OwnedJob(ctx context.Context, owner, id string) (domain.Job, error)
	// JobLimits are the concurrency limits a job's tasks are under: the
	// job's own, then its owner's.
	JobLimits(j domain.Job) []Limit
}

// Limit is one concurrency limit and the slot map that holds its slots.
type Limit = kernel.Limit

// Reader answers the read routes.
type Reader struct {
	cfg    Config
	store  Store
	blob   Blob
	kernel Kernel
	log    *slog.Logger
	// now is the control plane's clock, read at each call: tests move it
	// after the reader is made.
	now func() time.Time
}

// New returns a reader.
func New(cfg Config, store Store, b Blob, k Kernel, now func() time.Time, log *slog.Logger) *Reader {
	return &Reader{cfg: cfg, store: store, blob: b, kernel: k, now: now, log: log}
}

// ErrDataDeleted means the job's data was deleted by its owner: its
// outputs are gone for good (the API answers 410 Gone).
var ErrDataDeleted = errors.New("the job's data was deleted")

// DataDeletedError says whose data went, and when.
type DataDeletedError struct {
	ID string
	At time.Time
}

func (e *DataDeletedError) Error() string {
	return fmt.Sprintf("job %s's data was deleted at %s; its outputs are gone", e.ID, e.At.UTC().Format(time.RFC3339))
}
func (e *DataDeletedError) Unwrap() error { return ErrDataDeleted }
