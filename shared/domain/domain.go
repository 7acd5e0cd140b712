// Package domain holds Batchwork's domain types (tasks, jobs, stages,
// manifests, checkpoints, error classes) and the outcomes callers act on
// (ErrStaleClaim, ErrClaimHeld, ...), which adapters translate their
// conditional-write failures into. It declares no ports and imports no AWS
// SDK.
package domain

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Outcomes callers act on. Adapters translate conditional-write failures
// into these; handlers never see SDK error types.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrStaleClaim: the caller's claim token is no longer current: its lease
	// expired and another executor claimed the task, or the task moved on.
	// The caller must stop and must not publish anything as authoritative.
	ErrStaleClaim = errors.New("stale claim")
	// ErrClaimHeld: another executor holds a live claim (duplicate delivery).
	ErrClaimHeld = errors.New("task claimed by another executor")
	// ErrAlreadyDone: the task reached a terminal state; drop the message.
	ErrAlreadyDone = errors.New("task already finished")
	// ErrNotDue: the task is backing off; try again after the returned time.
	ErrNotDue = errors.New("task not due yet")
	// ErrJobNotRunning: the job failed, was cancelled or finished; its tasks
	// must not start.
	ErrJobNotRunning = errors.New("job not running")
	// ErrTaskCancelled: the job's owner cancelled the task; its attempt
	// stops, and nothing of it commits. It comes with ErrStaleClaim, as
	// the cancel ended the claim.
	ErrTaskCancelled = errors.New("task cancelled by its owner")
	// ErrIdempotencyConflict: an idempotency key was reused for a different
	// spec.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different spec")
	// ErrExists: a conditional create found the record (or object) present.
	ErrExists = errors.New("already exists")
	// ErrBadInput means a job's input cannot be used as given (no such
	// bucket, access denied, a key too long, too many splits): retrying
	// does not help, so the job fails with it. Every other error of a
	// control-plane step is treated as transient and retried.
	ErrBadInput = errors.New("bad input")
	// ErrPermanent marks a task's error as one no retry can fix (bad
	// data, a missing or changed input, a rejected request): the task
	// fails at once, without its remaining attempts. shared/batchwork's
	// Permanent wraps a task function's error with it.
	ErrPermanent = errors.New("permanent error")
)

// NotDueError carries when a backing-off task becomes claimable.
type NotDueError struct{ At time.Time }

func (e *NotDueError) Error() string {
	return "task not due until " + e.At.UTC().Format(time.RFC3339Nano)
}
func (e *NotDueError) Unwrap() error { return ErrNotDue }

// ClaimHeldError carries when the live claim may be taken over (its lease,
// or its executor's liveness promise, has lapsed by the skew margin), so
// the duplicate message can come back then instead of being lost.
type ClaimHeldError struct{ LeaseUntil time.Time }

func (e *ClaimHeldError) Error() string {
	return "task claimed by another executor until " + e.LeaseUntil.UTC().Format(time.RFC3339Nano)
}
func (e *ClaimHeldError) Unwrap() error { return ErrClaimHeld }

// TaskRef names a task: the job, the stage's index in the spec and the
// partition. Task ids are deterministic so that re-materializing a stage
// after a crash finds the tasks it already wrote.
type TaskRef struct {
	Job       string
	Stage     int
	Partition int
}

// String is the task id used in messages and logs: job/stage/partition.
func (r TaskRef) String() string {
	return r.Job + "/" + strconv.Itoa(r.Stage) + "/" + strconv.Itoa(r.Partition)
}

// ParseTaskRef parses TaskRef.String's form.
func ParseTaskRef(s string) (TaskRef, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[0] == "" {
		return TaskRef{}, fmt.Errorf("task id %q: want job/stage/partition", s)
	}
	st, err1 := strconv.Atoi(parts[1])
	p, err2 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || st < 0 || p < 0 {
		return TaskRef{}, fmt.Errorf("task id %q: stage and partition must be non-negative integers", s)
	}
	return TaskRef{Job: parts[0], Stage: st, Partition: p}, nil
}

// Task is a task record.
type Task struct {
	Ref         TaskRef
	State       sm.TaskState
	Attempt     int
	MaxAttempts int
	Token       string
	LeaseUntil  time.Time
	NotBefore   time.Time
	// SlotAt stamps the concurrency slots the current attempt's claim took
	// or took over (zero without limits): an attempt's end frees only
	// slots with its own stamp, never a newer attempt's.
	SlotAt time.Time
	// Executor is the id of the executor whose claim this is; its liveness
	// record tells others whether it still runs (see sm.GuardHolderDead).
	Executor string
	// Claimed is when the current attempt was claimed (zero on records
	// claimed before it was kept): the attempt's start in its history.
	Claimed time.Time
	Input   *split.Split // nil unless the stage reads an S3 prefix
	// CommittedAttempt and Outputs describe the authoritative outputs of a
	// SUCCEEDED task.
	CommittedAttempt int
	Outputs          int
	// Checkpoint is the task's last checkpoint and its continuations
	// (checkpoint.go); zero when it has none.
	Checkpoint CheckpointRef
	LastError  string
	// ErrorClass is the class of LastError (errorclass.go): for a FAILED
	// task, what ended it.
	ErrorClass ErrorClass
	// Memory is the executor size the task's next (or current) attempt
	// runs on: raised when an attempt runs out of memory; 0 means the
	// stage's own size (spec.Job.StageMemory).
	Memory  spec.Size
	Updated time.Time
	// Tolerated: a FAILED task whose failure its stage tolerated
	// (toleratedFailures): it counts as finished and has no outputs.
	Tolerated bool
	// Copy is the task's speculative copy, nil when it was never copied
	// (speculation.go).
	Copy *CopyState
	// Watched: the sweep watches the task through an entry of its own (a
	// stage's only task, a retry, a redrive), not its chunk's ready
	// marker, as read.
	Watched bool
	// Unwritten: the task has no record yet (statemachine.TaskUnwritten);
	// a reader filled it in, READY at attempt 0.
	Unwritten bool
	// RedrivePending, on a FAILED task, is the count of the redrive that
	// is to put it back (0: none): its failure is an earlier generation's.
	RedrivePending int
	// TraceSpan is the span id (16 hex digits) of the task's span in its
	// job's trace (Job.Trace; shared/tracing), written with the record,
	// so every attempt joins it; empty when tracing was off.
	TraceSpan string
}

// View is the task as the lifecycle rules see it.
func (t Task) View() sm.TaskView {
	return sm.TaskView{State: t.State, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		Token: t.Token, LeaseUntil: t.LeaseUntil, NotBefore: t.NotBefore,
		CheckpointAttempt: t.Checkpoint.Attempt, Continuations: t.Checkpoint.Continuations,
		Copy: t.Copy.view(), Tolerated: t.Tolerated}
}

// Job is a job record: the immutable spec plus its status.
type Job struct {
	ID       string
	Owner    string
	Spec     *spec.Job
	SpecHash string
	State    sm.JobState
	Error    string
	Manifest string // S3 key of the job manifest once SUCCEEDED
	Created  time.Time
	Updated  time.Time
	Ended    time.Time
	// StartAt is when a job submitted with a start time starts (it is
	// WAITING until then), and Started when it did; both zero for a job
	// that started at its submission.
	StartAt time.Time
	Started time.Time
	// DataDeleted is when its owner asked for its data (every object
	// under its prefix) to be deleted; zero if never.
	DataDeleted time.Time
	// Deleting is when its owner asked for the job to be deleted (DELETE
	// /jobs/{id}); zero if never. A job being deleted is answered as
	// not found.
	Deleting time.Time
	// Redrives are its owner's redrives of it after it failed (redrive
	// in control), oldest first; len(Redrives) is the count a redrive
	// request names so that a repeated one does not redrive twice.
	Redrives []Redrive
	// RerunOf is the job this one reruns (POST /jobs/{id}/rerun), whose
	// committed outputs it reuses for the stages it does not run; Reused
	// maps those stages to the job whose tasks committed them.
	RerunOf string
	Reused  map[int]string
	// Trace is the W3C traceparent of the job's submit span, the root of
	// its trace (shared/tracing); empty when tracing was off.
	Trace string
}

// Redrive is one redrive of a failed job: when, and the error it had
// failed with.
type Redrive struct {
	At    time.Time
	Error string
}

// Stage is a stage record with its completion accounting.
type Stage struct {
	Job          string
	Index        int
	Name         string
	State        sm.StageState
	Total        int // tasks; 0 until materialized
	Shards       int // completion counters; see dynamo.ShardCount
	Materialized bool
	// Enqueued counts the tasks written and sent so far, in partition
	// order: materialization goes in chunks and resumes from here. In a
	// stage split into segments (SegmentTasks) it counts segment 0's.
	Enqueued int
	// SegmentTasks, set once when a large stage is planned, splits its
	// materialization into segments of that many tasks, each queued by
	// its own chain at once (segments.go); 0: one chain. Segments[k] is
	// the partition segment k's chain has reached, for k > 0.
	SegmentTasks int
	Segments     map[int]int
	Started      time.Time
	Ended        time.Time
	Error        string
	// Tolerated counts its tasks that failed within its
	// toleratedFailures allowance.
	Tolerated int
	// CopiesLaunched counts its speculative copies that were claimed, and
	// CopiesRunning those running when the sweep last looked at it.
	CopiesLaunched, CopiesRunning int
	// Trace is its job's (Job.Trace), written with it at submit: its
	// materialization and completion are spans of the job's trace.
	Trace string
}

// Progress is a stage's committed-task count, summed from its shards.
type Progress struct {
	Total     int
	Committed int
	Left      int
	// Missing counts counters not created yet (a stage mid-materialization):
	// such a stage is never complete.
	Missing int
}

// Complete reports whether every task of the stage has committed. A stage
// with no tasks (an input prefix with no objects) is complete once its
// plan and counter exist; callers check the stage is materialized first.
func (p Progress) Complete() bool { return p.Missing == 0 && p.Left == 0 }

// Output names one committed output object.
type Output struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
	Part      int    `json:"part"`
	Key       string `json:"key"`
}

// Manifest lists the authoritative outputs of a stage or a job. It is
// written once, immutably, by the winner of the completion transition.
//
// A manifest of up to one page of outputs holds them itself, as every
// manifest did before pages. A larger one is an index: Pages names, in
// order, the objects (ManifestPage) that hold its outputs, PageSize each
// but the last, and its stored "outputs" is a string, not a list, so that
// readers that do not know pages fail instead of seeing none (see
// blob.ReadManifest, which reads both forms). Pages keep what a writer or
// a reader holds at once to one page, however many tasks and parts a
// stage has.
type Manifest struct {
	Job     string   `json:"job"`
	Stage   string   `json:"stage,omitempty"`
	Bucket  string   `json:"bucket"`
	Outputs []Output `json:"outputs"`
	// Total counts the outputs, in Outputs or over the pages. Manifests
	// written before pages lack it: Len counts them.
	Total    int      `json:"total,omitempty"`
	Pages    []string `json:"pages,omitempty"`
	PageSize int      `json:"pageSize,omitempty"`
	Created  string   `json:"created"`
	// Failed lists the partitions whose tasks failed for good within
	// their stage's toleratedFailures allowance (at most
	// MaxManifestFailed of them; FailedTotal counts all): they have no
	// outputs. A job manifest lists those of every stage of the job.
	Failed      []FailedPartition `json:"failed,omitempty"`
	FailedTotal int               `json:"failedTotal,omitempty"`
}

// MaxManifestFailed bounds the failed partitions a manifest lists, so a
// stage that tolerates many failures keeps a small manifest; `batchwork
// failed` lists them all.
const MaxManifestFailed = 1000

// FailedPartition is a task that failed for good, and why.
type FailedPartition struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempts  int    `json:"attempts"`
	Error     string `json:"error"`
	// Class is what ended it (an ErrorClass: "permanent", "timed_out"...).
	Class string `json:"class,omitempty"`
}

// Len is the number of outputs the manifest lists.
func (m Manifest) Len() int {
	if len(m.Pages) == 0 {
		return len(m.Outputs)
	}
	return m.Total
}

// ManifestPage is one page of a paged manifest (page Page, from 1).
type ManifestPage struct {
	Job     string   `json:"job"`
	Stage   string   `json:"stage,omitempty"`
	Page    int      `json:"page"`
	Outputs []Output `json:"outputs"`
}
