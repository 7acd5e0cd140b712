package statemachine

// TaskSplit is the holder of a running input task giving away the unread
// rest of its byte range as new tasks of its stage (dynamic splitting,
// spec Input.DynamicSplit). The task stays CLAIMED under the same claim;
// its range shrinks. Only the holder splits (GuardTokenMatches), and never
// a task that was ever copied (GuardCopyUnrequested): a speculative copy
// reads the range it was claimed with, so a split beside it would have
// bytes read twice. The store's transaction also guards the range and the
// stage (shared/dynamo/dynsplit.go).
const TaskSplit Event = "split"
