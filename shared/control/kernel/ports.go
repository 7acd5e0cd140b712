package kernel

import (
	"context"
	"io"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/schedule"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Store is every call the control plane makes on its state store,
// grouped by the entity each one reads or writes. Every method is
// mandatory: a feature never finds out at run time whether its store
// has it, so a wrapper that embeds Store (fault injection, a test's
// spy) keeps every feature, and a fake that cannot model one says so
// with an error rather than switching the feature off.
type Store interface {
	// Jobs: the job record, its state, its end and its owner's list.
	CreateJob(context.Context, dynamo.CreateJobParams) (string, bool, error)
	GetJob(context.Context, string) (batch.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	IdempotentJob(ctx context.Context, owner, idemKey string) (string, bool, error)
	// EndJobEvent ends a RUNNING job and names the ended event it wrote;
	// EndJobGen does so only while the job's redrive count is gen
	// (jobgen.go).
	EndJobEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error)
	EndJobGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error)
	RedriveCount(ctx context.Context, id string) (int, error)
	StartPublishing(ctx context.Context, id string, now time.Time) error
	MarkDataDeleted(ctx context.Context, id string, now time.Time) (time.Time, error)
	ListOwnerJobs(context.Context, dynamo.ListJobsParams) ([]batch.JobSummary, string, error)

	// Job deletion and retention (operations/jobdelete.go, operations/retention.go).
	MarkJobDeleting(ctx context.Context, id, owner string, now time.Time) error
	DeleteJobRecords(ctx context.Context, job string, budget int) (deleted int, complete bool, err error)
	DeleteJobItem(ctx context.Context, job string) (int, error)
	// PostponeExpiry moves an ended job's turn in the sweep to until and
	// the TTL of its records with it, in one write.
	PostponeExpiry(ctx context.Context, job, owner string, until time.Time) error

	// Redrives and reruns (operations/redrive.go, operations/rerun.go).
	RedriveJob(context.Context, dynamo.RedriveJobParams) error
	RedriveStage(ctx context.Context, job string, idx int, ev sm.Event, now, due time.Time) error
	RedriveTask(ctx context.Context, ref batch.TaskRef, budget, gen int, now, notBefore, due time.Time) error
	RaiseAttempts(ctx context.Context, ref batch.TaskRef, budget, gen int) error
	MarkTaskRedrive(ctx context.Context, ref batch.TaskRef, gen int) error
	AdoptStage(ctx context.Context, job string, idx, total int) error
	AdoptTolerated(ctx context.Context, job string, idx, tolerated int) error

	// Stages: state, plan, materialization and what status shows of them.
	ListStages(context.Context, string) ([]batch.Stage, error)
	GetStage(context.Context, string, int) (batch.Stage, error)
	TransitionStage(context.Context, dynamo.StageTransitionParams) error
	SetStagePlan(ctx context.Context, job string, idx, total int) (batch.Stage, error)
	ChargeStagePlan(context.Context, dynamo.PlanChargeParams) error
	MarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error
	AdvanceEnqueued(ctx context.Context, job string, idx, from, to int, due time.Time) (bool, error)
	HurryStage(ctx context.Context, job string, stage int, due time.Time) error
	Progress(context.Context, batch.Stage) (batch.Progress, error)
	StageStats(ctx context.Context, job string) ([]batch.StageStats, error)
	StageDurations(ctx context.Context, job string, stage, shards int) (batch.Durations, error)
	PutRateSample(ctx context.Context, job string, idx int, prev time.Time, smp batch.RateSample) (bool, error)
	SetCopiesRunning(ctx context.Context, job string, idx, n int) error
	BadRecordCounts(ctx context.Context, job string) (map[int]int64, error)

	// Completion counters: a stage's shards of uncommitted tasks.
	PutShards(ctx context.Context, job string, idx, total, shards int) error
	ShardLeft(ctx context.Context, job string, idx, shard int) (int, error)
	ShardEmptied(ctx context.Context, job string, stage, shard int) (all bool, err error)
	EnsureCounted(ctx context.Context, ref batch.TaskRef, shards int) (counted, shardDone bool, err error)
	CountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error)

	// Tasks: records, claims fenced by their token, and every way an
	// attempt ends.
	PutTasks(context.Context, []batch.Task, time.Time) error
	GetTask(context.Context, batch.TaskRef) (batch.Task, error)
	ListStageTasks(ctx context.Context, job string, stage, total int) ([]batch.Task, error)
	ListTaskPage(context.Context, dynamo.TaskPageParams) (dynamo.TaskPage, error)
	ClaimTask(context.Context, dynamo.ClaimParams) (batch.Task, error)
	ForgetClaim(ctx context.Context, ref batch.TaskRef, token string) error
	Heartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	CommitTask(context.Context, dynamo.CommitParams) (shardDone bool, err error)
	ReleaseTask(context.Context, dynamo.ReleaseParams) (batch.Task, error)
	FailTolerated(context.Context, dynamo.TolerateParams) (batch.Task, error)
	SweepTask(context.Context, dynamo.SweepTaskParams) error
	TakeoverTask(context.Context, dynamo.TakeoverParams) (batch.Task, error)
	LoseTaskForMemory(ctx context.Context, p dynamo.LostForMemoryParams) (batch.Task, error)
	UnindexTask(context.Context, batch.Task) error
	CheckpointTask(context.Context, dynamo.CheckpointParams) error
	ContinueTask(context.Context, dynamo.ContinueParams) (batch.Task, error)
	SplitTask(context.Context, dynamo.SplitTaskParams) (int, error)

	// Speculative copies of a running task (speculation.go).
	RequestCopy(ctx context.Context, ref batch.TaskRef, now time.Time) error
	ClaimCopy(context.Context, dynamo.ClaimParams) (batch.Task, error)
	CopyHeartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	DropClaim(context.Context, dynamo.DropParams) (batch.Task, error)

	// Attempt ends and the job's timeline.
	RecordAttemptEnd(context.Context, dynamo.AttemptEndParams) (bool, error)
	AttemptEnds(ctx context.Context, job string, stage, from, to int) ([]batch.AttemptEnd, error)
	RecordTimelineEvent(context.Context, batch.AttemptEnd) error
	RecordSpeculationEvent(context.Context, batch.AttemptEnd) error
	JobEvents(ctx context.Context, job, after string, limit int) ([]dynamo.TimelineEvent, error)

	// The sweep's index of due records.
	DueItems(ctx context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error)
	SetDue(context.Context, dynamo.DueItem, time.Time) error

	// Concurrency slots (limits.go, ownerlimits.go).
	AcquireSlot(ctx context.Context, m dynamo.SlotMap, ref batch.TaskRef, limit int, at time.Time) (dynamo.SlotOutcome, time.Time, error)
	RestampSlot(ctx context.Context, m dynamo.SlotMap, ref batch.TaskRef, from, to time.Time) (bool, error)
	ReleaseSlot(ctx context.Context, m dynamo.SlotMap, ref batch.TaskRef, at time.Time) error
	SlotHolders(ctx context.Context, m dynamo.SlotMap) (map[batch.TaskRef]time.Time, error)

	// Executors: liveness, memory and kills (executors.go, oomkill.go).
	RenewExecutor(ctx context.Context, id string, until time.Time) error
	ExecutorAlive(ctx context.Context, id string) (time.Time, error)
	RenewExecutorMemory(ctx context.Context, id string, until time.Time, usedMiB, limitMiB int64) error
	MarkExecutorKilled(ctx context.Context, id, reason string, now time.Time) error
	ReadExecutorMemory(ctx context.Context, id string) (dynamo.ExecutorMemory, error)

	// Owners' quotas (admission/quotas.go).
	QuotaUse(ctx context.Context, owner string) (dynamo.QuotaUse, error)

	// Schedules, their due index and their runs (schedules.go, timers.go).
	CreateSchedule(ctx context.Context, sc schedule.Schedule, now time.Time, maxSchedules int) error
	GetSchedule(ctx context.Context, owner, id string) (dynamo.ScheduleRecord, error)
	ListSchedules(ctx context.Context, owner, after string, limit int) ([]dynamo.ScheduleRecord, string, error)
	SetPaused(ctx context.Context, owner, id string, paused bool, now time.Time) (bool, error)
	DeleteSchedule(ctx context.Context, owner, id string) error
	AdvanceCursor(ctx context.Context, owner, id string, old, cur time.Time, lastJob string, next time.Time, entry dynamo.IndexEntry, now time.Time) error
	DueEntries(ctx context.Context, b schedule.Bucket, limit int) ([]dynamo.IndexEntry, error)
	MoveEntry(ctx context.Context, old dynamo.IndexEntry, next, now time.Time) error
	Watermark(ctx context.Context) (time.Time, bool, error)
	AdvanceWatermark(ctx context.Context, old, to time.Time) error
	PutRun(ctx context.Context, id string, r dynamo.Run) error
	Runs(ctx context.Context, id string, before time.Time, limit int) ([]dynamo.Run, error)

	// The catalog of task names and exec programs executors published
	// (admission/tasknames.go, admission/programs.go).
	AddTaskNames(ctx context.Context, names []string) error
	TaskNames(ctx context.Context) ([]string, error)
	AddPrograms(ctx context.Context, names []string) error
	Programs(ctx context.Context) ([]string, error)
}

// TaskCatalog stores the task names and exec programs executors
// published (dynamo.Store: one item). Service.Catalog is the store's
// unless a test puts another in.
type TaskCatalog interface {
	AddTaskNames(ctx context.Context, names []string) error
	TaskNames(ctx context.Context) ([]string, error)
	AddPrograms(ctx context.Context, names []string) error
	Programs(ctx context.Context) ([]string, error)
}

// Queue is what the control plane needs of SQS.
type Queue interface {
	SendBatch(ctx context.Context, url string, msgs []queue.Send) error
	Receive(ctx context.Context, url string, maxN int, wait, visibility time.Duration) ([]queue.Message, error)
	DeleteBatch(ctx context.Context, url string, receipts []string) error
}

// Blob is every call the control plane makes on S3, all mandatory as
// Store's are.
type Blob interface {
	// The data bucket: plans, outputs, manifests, checkpoints.
	Bucket() string
	PutIfAbsent(ctx context.Context, key string, body []byte) error
	Get(ctx context.Context, key string) ([]byte, error)
	MarkUncommitted(ctx context.Context, prefix string) (int, error)
	DeletePrefix(ctx context.Context, prefix string, maxPages int) (blob.DeleteResult, error)
	// PresignGet makes a time-limited GET URL of an object of the data
	// bucket (readside/outputs.go).
	PresignGet(ctx context.Context, key string, ttl time.Duration) (string, error)

	// Inputs in any granted bucket: listing, and pinning each listed
	// object to its version where the bucket is versioned (blob/versions.go).
	List(ctx context.Context, bucket, prefix string) ([]split.Object, error)
	PinVersions(ctx context.Context, bucket, prefix string, objs []split.Object) ([]split.Object, error)

	// Publishing into any granted bucket (stages/publish.go): conditional
	// writes and copies, reads and paged listings.
	PutIfAbsentIn(ctx context.Context, bucket, key string, body []byte) error
	CopyIfAbsent(ctx context.Context, srcKey, dstBucket, dstKey string) error
	Open(ctx context.Context, bucket, key string, start int64) (io.ReadCloser, error)
	ListPage(ctx context.Context, bucket, prefix, startAfter string) ([]string, bool, error)
}

var (
	_ Store = (*dynamo.Store)(nil)
	_ Queue = (*queue.Queue)(nil)
	_ Blob  = (*blob.Store)(nil)
)
