package statemachine

import "time"

// TaskState is where a task is in its lifecycle.
type TaskState string

const (
	// TaskReady: created by stage materialization (or put back by a retry or
	// an expired lease); a message for it is on its ready queue. Left by a
	// claim or a cancel.
	TaskReady TaskState = "READY"
	// TaskClaimed: an executor holds the claim token and a lease. Left by the
	// holder's commit, retry or fail, by another executor's reclaim after the
	// lease expired, by the sweep (expire, exhaust) or by a cancel.
	TaskClaimed TaskState = "CLAIMED"
	// TaskSucceeded: its outputs for the committed attempt are authoritative.
	TaskSucceeded TaskState = "SUCCEEDED"
	// TaskFailed: it used up its attempts (or failed permanently, or its
	// owner cancelled it: TaskOwnerCancel); its
	// stage and job fail with it, unless its stage tolerates the failure
	// (StageTolerate, written in the same transaction), when it counts as
	// finished for its stage and has no outputs.
	TaskFailed TaskState = "FAILED"
	// TaskCancelled: its job was cancelled or failed before it finished.
	TaskCancelled TaskState = "CANCELLED"
)

// TaskUnwritten is the state of a task whose record was never written. A
// stage whose tasks carry nothing but their position (partitioned by
// count, or reading a shuffle) is materialized without task records: its
// chunks' ready markers and messages only. Such a task is READY at
// attempt 0, due at once, with its stage's attempts, until the first
// write to it: its first claim (TaskClaim from TaskUnwritten), or the
// sweep's look at its chunk putting it in the index to resend or cancel
// it. Every reader of task records reads a missing one of a materialized
// chunk as this.
const TaskUnwritten = TaskReady

// Task events.
const (
	TaskClaim     Event = "claim"
	TaskReclaim   Event = "reclaim"
	TaskHeartbeat Event = "heartbeat"
	TaskCommit    Event = "commit"
	TaskRetry     Event = "retry"
	TaskFail      Event = "fail"
	TaskExpire    Event = "expire"
	TaskExhaust   Event = "exhaust"
	TaskCancel    Event = "cancel"
	// TaskTakeover acts on a claim whose executor died: another executor
	// takes the task over at once as a new attempt, without waiting for
	// the task's lease. A last attempt is not failed this way: only its
	// lease's expiry fails it (TaskExhaust), so liveness can speed up
	// recovery but never end a job.
	TaskTakeover Event = "takeover"
	// TaskFailPermanent is the holder's failure with an error no retry
	// can fix (a task function's batchwork.Permanent error): the task
	// fails at once, whatever attempts it has left.
	TaskFailPermanent Event = "fail permanent"
	// TaskCheckpoint is the holder saving its progress inside the task
	// (an offset in its input, a state blob, its outputs so far): fenced
	// by the token, so a stale attempt's checkpoint is never recorded and
	// never resumed from.
	TaskCheckpoint Event = "checkpoint"
	// TaskContinue hands a checkpointed task on to a new invocation (a
	// Lambda host near its time limit) without spending an attempt: the
	// task goes back to READY and its attempt budget grows by one. It
	// needs a checkpoint saved by the holder's own attempt (progress) and
	// is capped at MaxContinuations, so a task that never finishes cannot
	// loop for ever.
	TaskContinue Event = "continue"
)

// MaxContinuations caps a task's continuations: 96 invocations of
// Lambda's 15 minutes are a day of work.
const MaxContinuations = 96

// Task guards.
const (
	// GuardDue: the task's not-before time (retry backoff) has passed.
	GuardDue Guard = "due"
	// GuardLeaseExpired: the current claim's lease has passed.
	GuardLeaseExpired Guard = "lease expired"
	// GuardTokenMatches: the caller holds the current claim token. This is
	// the fence that keeps a stale executor from changing the task.
	GuardTokenMatches Guard = "token matches"
	// GuardAttemptsLeft: attempt < max attempts, so another attempt may run.
	GuardAttemptsLeft Guard = "attempts left"
	// GuardNoAttemptsLeft: attempt >= max attempts.
	GuardNoAttemptsLeft Guard = "no attempts left"
	// GuardOutputsExist: the attempt's outputs are in S3 (checked by the
	// committer before the write, not by the store).
	GuardOutputsExist Guard = "outputs exist"
	// GuardHolderDead: the executor holding the claim has not renewed its
	// liveness record for LivenessSkew past its last promise (or has none).
	// An executor renews one record for all its tasks every second or so,
	// so its death is seen in seconds, while task leases stay long and
	// cheap.
	GuardHolderDead Guard = "holder dead"
	// GuardCheckpointed: the current attempt saved a checkpoint (the
	// checkpoint's attempt is the task's attempt, or the holder's beside
	// a speculative copy that ended: speculation.go).
	GuardCheckpointed Guard = "checkpointed this attempt"
	// GuardContinuationsLeft: the task has continued fewer than
	// MaxContinuations times.
	GuardContinuationsLeft Guard = "continuations left"
)

// Tasks is the task lifecycle. Claim and reclaim both increment the attempt
// and issue a fresh token; the lease lives in the task record.
var Tasks = Machine[TaskState]{
	Name:     "task",
	States:   []TaskState{TaskReady, TaskClaimed, TaskSucceeded, TaskFailed, TaskCancelled},
	Initial:  []TaskState{TaskReady},
	Terminal: []TaskState{TaskSucceeded, TaskFailed, TaskCancelled},
	// speculation.go adds the transitions of speculative copies.
	Transitions: append([]Transition[TaskState]{
		{Event: TaskClaim, From: []TaskState{TaskReady}, To: TaskClaimed, Guards: []Guard{GuardDue}},
		{Event: TaskReclaim, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardLeaseExpired, GuardAttemptsLeft, GuardNoCopy}},
		{Event: TaskHeartbeat, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardTokenMatches}},
		{Event: TaskCommit, From: []TaskState{TaskClaimed}, To: TaskSucceeded, Guards: []Guard{GuardAnyTokenMatches, GuardOutputsExist}},
		{Event: TaskRetry, From: []TaskState{TaskClaimed}, To: TaskReady, Guards: []Guard{GuardTokenMatches, GuardAttemptsLeft, GuardNoCopy}},
		{Event: TaskFail, From: []TaskState{TaskClaimed}, To: TaskFailed, Guards: []Guard{GuardTokenMatches, GuardNoAttemptsLeft, GuardNoCopy}},
		{Event: TaskExpire, From: []TaskState{TaskClaimed}, To: TaskReady, Guards: []Guard{GuardLeaseExpired, GuardAttemptsLeft, GuardNoCopy}},
		{Event: TaskExhaust, From: []TaskState{TaskClaimed}, To: TaskFailed, Guards: []Guard{GuardLeaseExpired, GuardNoAttemptsLeft, GuardNoCopy}},
		{Event: TaskCancel, From: []TaskState{TaskReady, TaskClaimed}, To: TaskCancelled},
		{Event: TaskTakeover, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardHolderDead, GuardAttemptsLeft, GuardNoCopy}},
		{Event: TaskFailPermanent, From: []TaskState{TaskClaimed}, To: TaskFailed, Guards: []Guard{GuardTokenMatches, GuardNoCopy}},
		{Event: TaskCheckpoint, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardTokenMatches}},
		{Event: TaskContinue, From: []TaskState{TaskClaimed}, To: TaskReady, Guards: []Guard{GuardTokenMatches, GuardCheckpointed, GuardContinuationsLeft}},
		{Event: TaskRedrive, From: []TaskState{TaskReady, TaskFailed, TaskCancelled}, To: TaskReady, Guards: []Guard{GuardNotTolerated}}, // redrive.go
		{Event: TaskSplit, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardTokenMatches, GuardCopyUnrequested}},    // dynsplit.go
	}, append(speculationTransitions, append(oomTransitions, ownerCancelTransitions...)...)...), // oomkill.go, taskcancel.go
}

// StageState is where a stage is in its lifecycle.
type StageState string

const (
	// StageBlocked: waiting for the stages in its `after` list. Left by the
	// start that the last upstream completion (or the sweep) makes.
	StageBlocked StageState = "BLOCKED"
	// StageRunning: its tasks are materialized (or being materialized by the
	// starter; the sweep finishes an interrupted one). Left when the last
	// task commits, a task fails, or the job is cancelled.
	StageRunning StageState = "RUNNING"
	// StageCompleted: every task committed; exactly one committer made it so.
	StageCompleted StageState = "COMPLETED"
	// StageFailed: one of its tasks failed for good.
	StageFailed StageState = "FAILED"
	// StageCancelled: the job ended before the stage did.
	StageCancelled StageState = "CANCELLED"
)

// Stage events.
const (
	StageStart    Event = "start"
	StageComplete Event = "complete"
	StageFail     Event = "fail"
	StageCancel   Event = "cancel"
	// StageTolerate counts one of a running stage's tasks failed for good
	// within the stage's toleratedFailures allowance. It is written in the
	// transaction that fails the task, together with the countdown of the
	// task's completion shard, so the failed task counts as finished and
	// concurrent failures can never pass the allowance. When its guard
	// does not hold, the task fails without it and fails the job.
	StageTolerate Event = "tolerate"
)

// Stage guards.
const (
	// GuardUpstreamCompleted: every stage in `after` is COMPLETED (read
	// consistently by the starter before the conditional write).
	GuardUpstreamCompleted Guard = "upstream completed"
	// GuardAllTasksCommitted: every completion shard has counted to zero:
	// each task committed, or failed within the stage's allowance
	// (StageTolerate).
	GuardAllTasksCommitted Guard = "all tasks committed"
	// GuardJobRunning: the stage's job is still RUNNING, checked in the same
	// write. A job that was cancelled or failed never starts or completes a
	// stage afterwards, so no late commit can unblock downstream stages or
	// publish a job manifest for it.
	GuardJobRunning Guard = "job running"
	// GuardFailuresTolerated: the stage has tolerated fewer failed tasks
	// than its allowance (spec toleratedFailures, of its task total); see
	// Tolerates.
	GuardFailuresTolerated Guard = "failures within allowance"
)

// Tolerates evaluates GuardFailuresTolerated in memory: a stage that has
// tolerated failed tasks so far may tolerate one more under allowed.
func Tolerates(failed, allowed int) bool { return failed < allowed }

// Stages is the stage lifecycle.
var Stages = Machine[StageState]{
	Name:     "stage",
	States:   []StageState{StageBlocked, StageRunning, StageCompleted, StageFailed, StageCancelled},
	Initial:  []StageState{StageBlocked},
	Terminal: []StageState{StageCompleted, StageFailed, StageCancelled},
	Transitions: []Transition[StageState]{
		{Event: StageStart, From: []StageState{StageBlocked}, To: StageRunning, Guards: []Guard{GuardUpstreamCompleted, GuardJobRunning}},
		{Event: StageComplete, From: []StageState{StageRunning}, To: StageCompleted, Guards: []Guard{GuardAllTasksCommitted, GuardJobRunning}},
		{Event: StageFail, From: []StageState{StageRunning}, To: StageFailed},
		{Event: StageCancel, From: []StageState{StageBlocked, StageRunning}, To: StageCancelled},
		{Event: StageTolerate, From: []StageState{StageRunning}, To: StageRunning, Guards: []Guard{GuardFailuresTolerated}},
		{Event: StageRedrive, From: []StageState{StageFailed, StageCancelled}, To: StageRunning, Guards: []Guard{GuardStageStarted, GuardJobRunning}}, // redrive.go
		{Event: StageRedriveBlocked, From: []StageState{StageCancelled}, To: StageBlocked, Guards: []Guard{GuardStageNeverStarted, GuardJobRunning}},  // redrive.go
	},
}

// JobState is where a job is in its lifecycle.
type JobState string

const (
	// JobRunning: submitted and not finished. Left when its last stage
	// completes, a stage fails, or a user cancels it.
	JobRunning JobState = "RUNNING"
	// JobPublishing: every stage completed and the manifest is written; the
	// job's outputs are being published to its output folder (spec
	// Job.Output; a job without one never enters it). Its work is done, so
	// neither a cancel nor its deadline ends it: only the publisher does,
	// as SUCCEEDED once the folder's _SUCCESS is written or as FAILED on a
	// publish error no retry changes. That is what makes _SUCCESS mean
	// "this job succeeded": no other step can end the job between the
	// check and the write.
	JobPublishing JobState = "PUBLISHING"
	// JobSucceeded: every stage completed, the manifest is written and
	// the outputs, if the job names a folder, are published.
	JobSucceeded JobState = "SUCCEEDED"
	// JobFailed: a task failed for good; the job's error says which and why.
	JobFailed JobState = "FAILED"
	// JobCancelled: a user cancelled it; committed outputs are kept.
	JobCancelled JobState = "CANCELLED"
)

// Job events.
const (
	JobSucceed Event = "succeed"
	JobFail    Event = "fail"
	JobCancel  Event = "cancel"
	// JobPublish starts publishing a job's outputs; JobPublished and
	// JobPublishFail end it, the only events a PUBLISHING job takes.
	JobPublish     Event = "publish"
	JobPublished   Event = "published"
	JobPublishFail Event = "publish fail"
)

// Job guards.
const (
	// GuardAllStagesCompleted: every stage is COMPLETED and the manifest has
	// been written.
	GuardAllStagesCompleted Guard = "all stages completed"
	// GuardNoOutput: the job names no output folder; one that does goes
	// through PUBLISHING (checked by the caller, from the spec).
	GuardNoOutput Guard = "no output folder"
	// GuardOutputsPublished: every output of the manifest is in the output
	// folder and its _SUCCESS is written (checked against S3 by the
	// publisher before the write).
	GuardOutputsPublished Guard = "outputs published"
)

// Jobs is the job lifecycle.
var Jobs = Machine[JobState]{
	Name:     "job",
	States:   []JobState{JobWaiting, JobRunning, JobPublishing, JobSucceeded, JobFailed, JobCancelled},
	Initial:  []JobState{JobRunning, JobWaiting},
	Terminal: []JobState{JobSucceeded, JobFailed, JobCancelled},
	Transitions: []Transition[JobState]{
		{Event: JobSucceed, From: []JobState{JobRunning}, To: JobSucceeded, Guards: []Guard{GuardAllStagesCompleted, GuardNoOutput}},
		{Event: JobFail, From: []JobState{JobRunning}, To: JobFailed},
		{Event: JobCancel, From: []JobState{JobRunning, JobWaiting}, To: JobCancelled},
		{Event: JobStart, From: []JobState{JobWaiting}, To: JobRunning}, // jobstart.go
		{Event: JobPublish, From: []JobState{JobRunning}, To: JobPublishing, Guards: []Guard{GuardAllStagesCompleted}},
		{Event: JobPublished, From: []JobState{JobPublishing}, To: JobSucceeded, Guards: []Guard{GuardOutputsPublished}},
		{Event: JobPublishFail, From: []JobState{JobPublishing}, To: JobFailed},
		{Event: JobRedrive, From: []JobState{JobFailed}, To: JobRunning, Guards: []Guard{GuardRedriveCount}}, // redrive.go
	},
}

// LeaseSkew is how long past its time a lease still counts as held. A
// lease is written with its holder's clock and judged expired with
// another process's (an executor reclaiming, the sweep): a judge whose
// clock runs ahead would otherwise fence a live holder early, and on its
// last attempt fail the job. Clocks of Lambda and Fargate are kept by
// NTP to well under a second; the margin delays a dead holder's reclaim
// by as much.
const LeaseSkew = time.Second

// LivenessSkew is LeaseSkew for an executor's liveness promise. It can be
// small: misjudging a live executor dead costs an attempt and its work
// (the task is taken over and the old commit fenced), never a job, because
// a last attempt is never taken over (GuardAttemptsLeft); and every second
// of margin is a second more of recovery from a dead executor.
const LivenessSkew = 250 * time.Millisecond

// TaskView is what the rules need to know of a task record.
type TaskView struct {
	State       TaskState
	Attempt     int
	MaxAttempts int
	Token       string
	LeaseUntil  time.Time
	NotBefore   time.Time
	// HolderAlive is how long the claim's executor promised to live (its
	// liveness record; zero when it has none).
	HolderAlive time.Time
	// Copy is the task's speculative copy (speculation.go).
	Copy CopyView
	// CheckpointAttempt is the attempt that saved the task's last
	// checkpoint (0: none), and Continuations how often it continued.
	CheckpointAttempt int
	Continuations     int
	// Tolerated: a FAILED task whose failure its stage tolerated.
	Tolerated bool
}

// TaskInput is the caller's side of a task event: when it happens and, for
// the holder's events, the token the caller holds.
type TaskInput struct {
	At    time.Time
	Token string
}

// Holds evaluates a task guard in memory. Stores express the same guards as
// conditions; integration.TestStoreConditionsAgreeWithGuards checks that
// DynamoDB accepts exactly what these rules allow.
func Holds(g Guard, t TaskView, in TaskInput) bool {
	switch g {
	case GuardDue:
		return !in.At.Before(t.NotBefore)
	case GuardLeaseExpired:
		return in.At.After(t.LeaseUntil.Add(LeaseSkew))
	case GuardTokenMatches:
		return t.Token != "" && t.Token == in.Token
	case GuardAttemptsLeft:
		return t.Attempt < t.MaxAttempts
	case GuardNoAttemptsLeft:
		return t.Attempt >= t.MaxAttempts
	case GuardOutputsExist:
		return true // checked against S3 before the write, not on the record
	case GuardHolderDead:
		return in.At.After(t.HolderAlive.Add(LivenessSkew))
	case GuardCheckpointed:
		return t.CheckpointAttempt > 0 && (t.CheckpointAttempt == t.Attempt || holderCheckpointed(t)) // speculation.go
	case GuardContinuationsLeft:
		return t.Continuations < MaxContinuations
	case GuardNotTolerated:
		return !t.Tolerated
	}
	holds, _ := holdsCopy(g, t, in)
	return holds
}

// Decide returns the transition that event ev takes for task t, or an error
// wrapping ErrInvalidTransition when the state or a guard forbids it. The
// error names the guard that failed, so callers can tell a stale claim from
// a live one.
func Decide(t TaskView, ev Event, in TaskInput) (Transition[TaskState], error) {
	tr, err := Tasks.Lookup(t.State, ev)
	if err != nil {
		return tr, err
	}
	for _, g := range tr.Guards {
		if !Holds(g, t, in) {
			return Transition[TaskState]{}, &GuardError{Event: ev, State: t.State, Guard: g}
		}
	}
	return tr, nil
}

// GuardError says which guard refused a transition.
type GuardError struct {
	Event Event
	State TaskState
	Guard Guard
}

func (e *GuardError) Error() string {
	return "task " + string(e.State) + " on " + string(e.Event) + ": guard " + string(e.Guard) + " does not hold"
}

func (e *GuardError) Unwrap() error { return ErrInvalidTransition }
