package statemachine

// Redrive (issue 13.9): an owner retries a FAILED job in place after a
// fix, the way a Step Functions Distributed Map redrive does. The job, its
// failed and cancelled stages and the tasks that did not finish leave
// their terminal states again; committed tasks, completed stages and
// failures a stage tolerated are never touched. These are the only
// events that leave a terminal state (see Machine.IsTerminal).

// Redrive events.
const (
	// TaskRedrive puts a task that failed, was cancelled or never ran
	// (READY) back to READY with a fresh attempt budget. A failure its
	// stage tolerated stays: its stage counted it finished.
	TaskRedrive Event = "redrive"
	// StageRedrive reopens a stage that had started (FAILED, or CANCELLED
	// when its job ended) as RUNNING.
	StageRedrive Event = "redrive"
	// StageRedriveBlocked puts a stage the job's end cancelled before it
	// started back to BLOCKED, for its upstream's completion to start.
	StageRedriveBlocked Event = "redrive blocked"
	// JobRedrive reopens a FAILED job as RUNNING.
	JobRedrive Event = "redrive"
)

// Redrive guards.
const (
	// GuardNotTolerated: the task's failure was not one its stage
	// tolerated (a tolerated one counted down its completion shard).
	GuardNotTolerated Guard = "failure not tolerated"
	// GuardStageStarted and GuardStageNeverStarted: whether the stage
	// had started (its start time is recorded).
	GuardStageStarted      Guard = "stage started"
	GuardStageNeverStarted Guard = "stage never started"
	// GuardRedriveCount: the caller's redrive count is the job's, so a
	// repeated request (a retry after a lost answer) never redrives twice.
	GuardRedriveCount Guard = "redrive count matches"
)

// IsRedrive reports whether ev is a redrive event, the one kind that
// leaves a terminal state.
func IsRedrive(ev Event) bool {
	return ev == TaskRedrive || ev == StageRedrive || ev == StageRedriveBlocked || ev == JobRedrive
}
