package statemachine

// A job submitted to start at a later time (`batchwork submit --at`) is
// recorded WAITING: its spec was checked and it counts against its
// owner's quotas, but none of its stages has started. The timer that
// starts it (the schedule index's start entry) moves it to RUNNING once;
// a cancel before then ends it as CANCELLED, and the start then finds
// nothing to do.

// JobWaiting: submitted with a start time that has not come yet. Left by
// its start (JobStart) or a cancel.
const JobWaiting JobState = "WAITING"

// JobStart starts a WAITING job at its start time: it becomes RUNNING and
// its root stages start as a submission's do.
const JobStart Event = "start"
