package statemachine

// TaskLostForMemory acts on a claim whose executor died, and whose death
// looks like the kernel's or Lambda's out-of-memory kill: its liveness
// record says it was killed for memory (a Fargate container's
// OutOfMemoryError) or last reported memory near its size. Instead of
// taking the task over on an executor of the same size (TaskTakeover),
// which would only run out of memory again, the task goes back to READY,
// to be claimed on the next executor size up, and the dead holder's
// attempt counts as ended out of memory. The guards are TaskTakeover's: a
// last attempt is left to its lease (TaskExhaust), so a misjudged
// executor never fails a job this way.
const TaskLostForMemory Event = "lost for memory"

var oomTransitions = []Transition[TaskState]{
	{Event: TaskLostForMemory, From: []TaskState{TaskClaimed}, To: TaskReady, Guards: []Guard{GuardHolderDead, GuardAttemptsLeft, GuardNoCopy}},
}
