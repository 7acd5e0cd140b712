package statemachine

// TaskOwnerCancel is the job's owner cancelling one task (`batchwork
// cancel JOB --task STAGE/PARTITION`): a task that waits (READY, in its
// queue or its backoff) or runs (CLAIMED, by any attempt, a speculative
// copy's included) fails at once as cancelled, whatever attempts it has
// left. Unlike TaskCancel, which ends a task because its job ended, the
// task FAILS: its stage goes on without it within its toleratedFailures
// allowance (StageTolerate, in the same write), and past it the job fails
// naming the task. No token guard: the owner holds none, and the write
// ends every live claim, so the cancelled attempt's heartbeat, commit,
// failure and checkpoint are all refused after it (they need CLAIMED). A
// task that committed first is not cancelled.
const TaskOwnerCancel Event = "owner cancel"

var ownerCancelTransitions = []Transition[TaskState]{
	{Event: TaskOwnerCancel, From: []TaskState{TaskReady, TaskClaimed}, To: TaskFailed},
}
