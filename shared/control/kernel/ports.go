package kernel

import (
	"context"
	"io"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
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
	JobCreate(context.Context, dynamo.CreateJobParams) (string, bool, error)
	JobGet(context.Context, string) (domain.Job, error)
	JobState(context.Context, string) (sm.JobState, error)
	JobByIdemKey(ctx context.Context, owner, idemKey string) (string, bool, error)
	// EndJobEvent ends a RUNNING job and names the ended event it wrote;
	// EndJobGen does so only while the job's redrive count is gen
	// (jobgen.go).
	JobEndEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error)
	JobEndGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error)
	JobRedriveCount(ctx context.Context, id string) (int, error)
	// JobStart starts a WAITING job (dynamo/jobstart.go).
	JobStart(context.Context, dynamo.JobStartParams) error
	JobStartPublishing(ctx context.Context, id string, now time.Time) error
	JobMarkDataDeleted(ctx context.Context, id string, now time.Time) (time.Time, error)
	JobListByOwner(context.Context, dynamo.ListJobsParams) ([]domain.JobSummary, string, error)

	// Job deletion and retention (operations/jobdelete.go, operations/retention.go).
	JobMarkDeleting(ctx context.Context, id, owner string, now time.Time) error
	JobDeleteRecords(ctx context.Context, job string, budget int) (deleted int, complete bool, err error)
	JobDeleteItem(ctx context.Context, job string) (int, error)
	// PostponeExpiry moves an ended job's turn in the sweep to until and
	// the TTL of its records with it, in one write.
	JobPostponeExpiry(ctx context.Context, job, owner string, until time.Time) error

	// Redrives and reruns (operations/redrive.go, operations/rerun.go).
	JobRedrive(context.Context, dynamo.RedriveJobParams) error
	StageRedrive(ctx context.Context, job string, idx int, ev sm.Event, now, due time.Time) error
	TaskRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int, now, notBefore, due time.Time) error
	TaskRaiseAttempts(ctx context.Context, ref domain.TaskRef, budget, gen int) error
	TaskMarkRedrive(ctx context.Context, ref domain.TaskRef, budget, gen int) error
	StageAdopt(ctx context.Context, job string, idx, total int) error
	StageAdoptTolerated(ctx context.Context, job string, idx, tolerated int) error

	// Stages: state, plan, materialization and what status shows of them.
	StageList(context.Context, string) ([]domain.Stage, error)
	StageGet(context.Context, string, int) (domain.Stage, error)
	StageTransition(context.Context, dynamo.StageTransitionParams) error
	StageSetPlan(ctx context.Context, job string, idx, total int) (domain.Stage, error)
	StageChargePlan(context.Context, dynamo.PlanChargeParams) error
	StageMarkMaterialized(ctx context.Context, job string, idx int, due time.Time) error
	StageAdvanceEnqueued(ctx context.Context, job string, idx, from, to int, due time.Time) (bool, error)
	StageSetSegments(ctx context.Context, job string, idx, size int) (domain.Stage, error)
	StageAdvanceSegment(ctx context.Context, job string, idx, seg, from, to int, due time.Time) (bool, error)
	StageHurry(ctx context.Context, job string, stage int, due time.Time) error
	StageProgress(context.Context, domain.Stage) (domain.Progress, error)
	StageStats(ctx context.Context, job string) ([]domain.StageStats, error)
	StageDurations(ctx context.Context, job string, stage, shards int) (domain.Durations, error)
	StagePutRateSample(ctx context.Context, job string, idx int, prev time.Time, smp domain.RateSample) (bool, error)
	StageSetCopiesRunning(ctx context.Context, job string, idx, n int) error
	StageBadRecordCounts(ctx context.Context, job string) (map[int]int64, error)

	// Completion counters: a stage's shards of uncommitted tasks.
	ShardPut(ctx context.Context, job string, idx, total, shards int) error
	ShardLeft(ctx context.Context, job string, idx, shard int) (int, error)
	ShardEmptied(ctx context.Context, job string, stage, shard int) (all bool, err error)
	ShardAddCost(ctx context.Context, job string, stage, shard int, flush string, c cost.Counts) error
	ShardEnsureCounted(ctx context.Context, ref domain.TaskRef, shards int) (counted, shardDone bool, err error)
	ShardCountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error)

	// Tasks: records, claims fenced by their token, and every way an
	// attempt ends.
	TaskPutMany(context.Context, []domain.Task, time.Time) error
	TaskGet(context.Context, domain.TaskRef) (domain.Task, error)
	TaskListStage(ctx context.Context, job string, stage, total int) ([]domain.Task, error)
	TaskListPage(context.Context, dynamo.TaskPageParams) (dynamo.TaskPage, error)
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

	// Speculative copies of a running task (speculation.go).
	CopyRequest(ctx context.Context, ref domain.TaskRef, now time.Time) error
	CopyClaim(context.Context, dynamo.ClaimParams) (domain.Task, error)
	CopyHeartbeat(ctx context.Context, p dynamo.HolderParams, lease, grace time.Duration) error
	TaskDropClaim(context.Context, dynamo.DropParams) (domain.Task, error)

	// Attempt ends and the job's timeline.
	AttemptRecordEnd(context.Context, dynamo.AttemptEndParams) (bool, error)
	AttemptEnds(ctx context.Context, job string, stage, from, to int) ([]domain.AttemptEnd, error)
	TimelineRecord(context.Context, domain.AttemptEnd) error
	TimelineEvents(ctx context.Context, job, after string, limit int) ([]dynamo.TimelineEvent, error)

	// The sweep's index of due records.
	DueList(ctx context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error)
	DueScan(ctx context.Context, now time.Time, limit int) (items []dynamo.DueItem, whole bool, err error)
	DueSet(context.Context, dynamo.DueItem, time.Time) error
	DueRemoveDone(context.Context) error

	// Concurrency slots (limits.go, ownerlimits.go).
	SlotAcquire(ctx context.Context, m dynamo.SlotMap, ref domain.TaskRef, limit int, at time.Time) (dynamo.SlotOutcome, time.Time, error)
	SlotRestamp(ctx context.Context, m dynamo.SlotMap, ref domain.TaskRef, from, to time.Time) (bool, error)
	SlotRelease(ctx context.Context, m dynamo.SlotMap, ref domain.TaskRef, at time.Time) error
	SlotHolders(ctx context.Context, m dynamo.SlotMap) (map[domain.TaskRef]time.Time, error)

	// Executors: liveness, memory and kills (executors.go, oomkill.go).
	ExecutorRenew(ctx context.Context, id string, until time.Time) error
	ExecutorAlive(ctx context.Context, id string) (time.Time, error)
	ExecutorRenewMemory(ctx context.Context, id string, until time.Time, usedMiB, limitMiB int64) error
	ExecutorMarkKilled(ctx context.Context, id, reason string, now time.Time) error
	ExecutorMemory(ctx context.Context, id string) (dynamo.ExecutorMemory, error)

	// Owners' quotas (admission/quotas.go).
	OwnerQuotaUse(ctx context.Context, owner string) (dynamo.QuotaUse, error)

	// Schedules, their due index and their runs (schedules.go, timers.go).
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

	// The catalog of task names and exec programs executors published
	// (admission/tasknames.go, admission/programs.go).
	CatalogAddTaskNames(ctx context.Context, names []string) error
	CatalogTaskNames(ctx context.Context) ([]string, error)
	CatalogAddPrograms(ctx context.Context, names []string) error
	CatalogPrograms(ctx context.Context) ([]string, error)
}

// TaskCatalog stores the task names and exec programs executors
// published (dynamo.Store: one item). Service.Catalog is the store's
// unless a test puts another in.
type TaskCatalog interface {
	CatalogAddTaskNames(ctx context.Context, names []string) error
	CatalogTaskNames(ctx context.Context) ([]string, error)
	CatalogAddPrograms(ctx context.Context, names []string) error
	CatalogPrograms(ctx context.Context) ([]string, error)
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
