package statemachine

import "time"

// Speculative execution (spec Stage.Speculation). A straggling task gets
// at most one speculative copy: a second attempt with its own token and
// lease, while the first attempt (the holder) keeps running. The task
// record then carries two live claims, which is the one designed
// exception to "a task has at most one live claim"; each claim is still
// its own attempt with its own token, fenced on its own.
//
// The rules of a task with two claims:
//   - either token may commit (GuardAnyTokenMatches); the commit makes the
//     task SUCCEEDED, which fences the other claim, whose executor sees
//     that at its next heartbeat and stops;
//   - a failure of one claim while the other lives spends no attempt and
//     does not retry or fail the task: the failed claim is dropped
//     (TaskYield for the holder, whose copy becomes the holder;
//     TaskCopyFail for the copy);
//   - no event that ends or replaces a claim wholesale (retry, fail,
//     reclaim, expire, exhaust, takeover) applies while a copy lives
//     (GuardNoCopy); a copy whose lease ran out is dropped first
//     (TaskCopyExpire), and the holder's claim is then judged as before;
//   - a task is copied at most once (GuardCopyUnrequested), so it never
//     has more than two live attempts.

// Speculation events.
const (
	// TaskSpeculate asks for a copy of a straggling task (the sweep); the
	// copy's message is then sent to the task's ready queue.
	TaskSpeculate Event = "speculate"
	// TaskClaimCopy is an executor claiming the requested copy: a new
	// attempt with a fresh token and its own lease.
	TaskClaimCopy Event = "claim copy"
	// TaskCopyHeartbeat extends the copy's lease.
	TaskCopyHeartbeat Event = "copy heartbeat"
	// TaskYield drops the holder's claim after its attempt failed while its
	// copy runs: the copy becomes the task's holder.
	TaskYield Event = "yield"
	// TaskCopyFail drops the copy's claim after its attempt failed; the
	// holder runs on.
	TaskCopyFail Event = "copy fail"
	// TaskCopyExpire drops a copy whose lease ran out (its executor died).
	TaskCopyExpire Event = "copy expire"
)

// Speculation guards.
const (
	// GuardNoCopy: the task has no live speculative copy.
	GuardNoCopy Guard = "no live copy"
	// GuardHasCopy: the task has a live speculative copy.
	GuardHasCopy Guard = "live copy"
	// GuardAnyTokenMatches: the caller holds one of the task's live claim
	// tokens, the holder's or the copy's (the commit fence).
	GuardAnyTokenMatches Guard = "a live token matches"
	// GuardCopyTokenMatches: the caller holds the copy's token.
	GuardCopyTokenMatches Guard = "copy token matches"
	// GuardCopyLeaseExpired: the copy's lease has passed (with LeaseSkew).
	GuardCopyLeaseExpired Guard = "copy lease expired"
	// GuardCopyUnrequested: the task was never copied (one copy per task).
	GuardCopyUnrequested Guard = "never copied"
	// GuardCopyRequested: a copy was requested and not claimed yet.
	GuardCopyRequested Guard = "copy requested"
)

// speculationTransitions are the task transitions of speculation; Tasks
// lists them.
var speculationTransitions = []Transition[TaskState]{
	{Event: TaskSpeculate, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardCopyUnrequested}},
	{Event: TaskClaimCopy, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardCopyRequested}},
	{Event: TaskCopyHeartbeat, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardCopyTokenMatches}},
	{Event: TaskYield, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardTokenMatches, GuardHasCopy}},
	{Event: TaskCopyFail, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardCopyTokenMatches}},
	{Event: TaskCopyExpire, From: []TaskState{TaskClaimed}, To: TaskClaimed, Guards: []Guard{GuardHasCopy, GuardCopyLeaseExpired}},
}

// CopyView is what the rules need to know of a task's speculative copy.
type CopyView struct {
	// Requested: a copy was asked for (ever); Started: one was claimed
	// (ever). Token and LeaseUntil are the live copy's (empty: none).
	Requested, Started bool
	Token              string
	LeaseUntil         time.Time
	// HolderAttempt is the attempt of the claim the copy ran beside, while
	// that claim holds the task (0: no copy started, or the copy became
	// the holder).
	HolderAttempt int
}

// holderCheckpointed: the holder of a task whose copy ended saved the
// task's checkpoint. The copy took the record's attempt number, so the
// holder's attempt is HolderAttempt; while the copy lives the holder may
// not continue (the task would go back to READY under a live copy).
func holderCheckpointed(t TaskView) bool {
	return t.Copy.Token == "" && t.Copy.HolderAttempt > 0 && t.CheckpointAttempt == t.Copy.HolderAttempt
}

// holdsCopy evaluates the speculation guards; ok is false for any other.
func holdsCopy(g Guard, t TaskView, in TaskInput) (holds, ok bool) {
	c := t.Copy
	switch g {
	case GuardNoCopy:
		return c.Token == "", true
	case GuardHasCopy:
		return c.Token != "", true
	case GuardAnyTokenMatches:
		return in.Token != "" && (in.Token == t.Token || in.Token == c.Token), true
	case GuardCopyTokenMatches:
		return c.Token != "" && in.Token == c.Token, true
	case GuardCopyLeaseExpired:
		return in.At.After(c.LeaseUntil.Add(LeaseSkew)), true
	case GuardCopyUnrequested:
		return !c.Requested, true
	case GuardCopyRequested:
		return c.Requested && !c.Started, true
	}
	return false, false
}

// IsStraggler says whether an attempt that has run for ran is a straggler
// of a stage whose committed attempts ran for median (the rule of
// spec.Speculation): longer than multiplier times the median. A stage
// without a median yet has no stragglers.
func IsStraggler(ran, median time.Duration, multiplier float64) bool {
	return median > 0 && float64(ran) > multiplier*float64(median)
}
