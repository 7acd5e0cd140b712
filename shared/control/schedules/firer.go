// Package schedules is the control plane's schedules and their firings:
// the schedule routes, the sweep's firing step, the timer queue's firings
// and the gate that orders a burst of them. It stands on kernel and asks
// the capabilities still in control for admission only (Admission).
package schedules

import (
	"context"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Config is what the schedules need of the control plane's configuration.
type Config struct {
	// ScheduleQuota caps each owner's schedules (control.Quotas.Schedules).
	ScheduleQuota kernel.OwnerLimits
	// TimerQueue is the timer queue (kernel.Queues.Timer); empty where
	// this process does not hand firings off (it then fires only from the
	// sweep).
	TimerQueue string
}

// Store is the calls the schedules make on the state store: the
// schedules group of the control plane's store, and the job reads a
// firing's overlap policy and run record need.
type Store interface {
	// Jobs.
	JobGet(context.Context, string) (domain.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	// Schedules, their due index and their runs.
	ScheduleCreate(ctx context.Context, sc schedule.Schedule, now time.Time, maxSchedules int) error
	ScheduleGet(ctx context.Context, owner, id string) (dynamo.ScheduleRecord, error)
	ScheduleList(ctx context.Context, owner, after string, limit int) ([]dynamo.ScheduleRecord, string, error)
	ScheduleSetPaused(ctx context.Context, owner, id string, paused bool, now time.Time) (bool, error)
	ScheduleDelete(ctx context.Context, owner, id string) error
	ScheduleAdvanceCursor(ctx context.Context, owner, id string, old, cur time.Time, lastJob string, next time.Time, entry dynamo.IndexEntry, runs []dynamo.Run, now time.Time) error
	ScheduleDueEntries(ctx context.Context, b schedule.Bucket, limit int) ([]dynamo.IndexEntry, error)
	ScheduleMoveEntry(ctx context.Context, old dynamo.IndexEntry, next, now time.Time) error
	ScheduleWatermark(ctx context.Context) (time.Time, bool, error)
	ScheduleAdvanceWatermark(ctx context.Context, old, to time.Time) error
	ScheduleShardTake(ctx context.Context, shard int, run string, now, until time.Time) (schedule.ShardLease, error)
	ScheduleShardAdvance(ctx context.Context, shard int, run string, old, to, now time.Time) error
	ScheduleShardRelease(ctx context.Context, shard int, run string) error
	ScheduleShards(ctx context.Context) ([]schedule.ShardLease, error)
	SchedulePutRun(ctx context.Context, id string, r dynamo.Run) error
	ScheduleRuns(ctx context.Context, id string, before time.Time, limit int) ([]dynamo.Run, error)
}

// Queue is the call the schedules make on the queues: the timer queue's
// sends.
type Queue interface {
	SendBatch(ctx context.Context, url string, msgs []queue.Send) error
}

// Admission is what the schedules ask of the control plane's admission:
// the checks a submission's owner and spec pass, a firing's submission,
// and the cancel of a previous run.
type Admission interface {
	// CheckOwner refuses an owner no submission may have, with a
	// *spec.FieldError.
	CheckOwner(owner string) error
	// CheckScheduleSpec runs a submission's checks on a schedule's parsed
	// spec at its creation (priority, task names, programs, executor
	// sizes, functions, inputs, no output folder); errors name the field
	// under "spec".
	CheckScheduleSpec(ctx context.Context, owner string, sp *spec.Job) error
	// SubmitFiring submits a firing's job, created only while the
	// schedule is as Guard says (else dynamo.ErrCursorMoved).
	SubmitFiring(ctx context.Context, f Firing) (Submitted, error)
	// CancelPrevious cancels an overlapping previous run; a job already
	// ended or gone is not an error.
	CancelPrevious(ctx context.Context, owner, job string) error
	// StartJob starts the WAITING job of a start entry (starts.go); job
	// is the job as read already (nil: StartJob reads it).
	StartJob(ctx context.Context, e dynamo.IndexEntry, job *domain.Job) (StartOutcome, error)
}

// Firing is one scheduled time's submission.
type Firing struct {
	Owner string
	// IdempotencyKey is schedule.FiringKey: racing firers create one job.
	IdempotencyKey string
	Spec           []byte
	// Params are the run parameters (schedule.Schedule.FiringParams).
	Params map[string]string
	Guard  dynamo.FiringGuard
}

// Submitted is the job a firing maps to.
type Submitted struct {
	JobID string
	// Created: this call created the job, at CreatedAt; else an earlier
	// firer's job was found by its idempotency key.
	Created   bool
	CreatedAt time.Time
}

// Firer holds the schedules and fires them.
type Firer struct {
	cfg       Config
	store     Store
	queue     Queue
	admission Admission
	log       *slog.Logger
	// now is the control plane's clock, read at each call: tests move it
	// after the firer is made.
	now func() time.Time
	// gate orders a burst of firings (firinggate.go).
	gate *firingGate
}

// New returns a firer.
func New(cfg Config, store Store, q Queue, a Admission, now func() time.Time, log *slog.Logger) *Firer {
	return &Firer{cfg: cfg, store: store, queue: q, admission: a, log: log, now: now, gate: newFiringGate()}
}
