package domain

import (
	"errors"
	"fmt"
)

// ErrContinue is the cause with which a task's context is cancelled when
// its executor is about to run out of time (a Lambda invocation close to
// its deadline): the function should save a checkpoint and return; the
// task then continues in a new invocation, from the checkpoint, without
// spending an attempt. context.Cause(ctx) says so; errors.Is tells it
// apart from a lost lease or an ended job.
var ErrContinue = errors.New("executor out of time: checkpoint and return, the task continues in a new invocation")

// MaxCheckpointState bounds a checkpoint's state blob: it is read whole
// by every resume, so it is meant for counters and cursors, not data
// (outputs are saved with the checkpoint by the runner).
const MaxCheckpointState = 64 << 10

// ErrCheckpoint marks a checkpoint the runner refused: bad arguments
// (a negative or backward offset, a state over MaxCheckpointState) or a
// task that cannot checkpoint.
var ErrCheckpoint = errors.New("checkpoint refused")

// CheckpointRef is what a task record keeps of its last checkpoint: which
// attempt saved it, its number in that attempt (the object holding it is
// blob.CheckpointKey of both), the input offset it reached, and how often
// the task continued in a new invocation. The record itself, with the
// state and the outputs so far, is in S3: a state of up to
// MaxCheckpointState on the task record would make every claim and
// heartbeat write cost that much.
type CheckpointRef struct {
	Attempt       int
	Seq           int
	Offset        int64
	Continuations int
}

// Saved reports whether the task has a checkpoint.
func (r CheckpointRef) Saved() bool { return r.Attempt > 0 }

// Checkpoint is a saved checkpoint, as stored in S3 (JSON).
type Checkpoint struct {
	Attempt int `json:"attempt"`
	Seq     int `json:"seq"`
	// Offset is how many bytes of the task's input (the stream the
	// function reads) it had consumed, on a record boundary: a resumed
	// attempt's input starts there.
	Offset int64  `json:"offset"`
	State  []byte `json:"state,omitempty"`
	// Outputs are the output partitions written up to the checkpoint,
	// one per partition: immutable segment objects, in order.
	Outputs []CheckpointOutput `json:"outputs"`
	// BadRecords are the records rejected up to the checkpoint (those
	// kept, and how many in all), so that a resumed attempt commits them
	// with its own.
	BadRecords     []BadRecord `json:"badRecords,omitempty"`
	BadRecordCount int64       `json:"badRecordCount,omitempty"`
}

// CheckpointOutput is one output partition up to a checkpoint: its
// segments (object keys, in order) and what the runner counts of it.
type CheckpointOutput struct {
	Segments []string `json:"segments,omitempty"`
	Size     int64    `json:"size"`
	Lines    int64    `json:"lines"`
	Last     byte     `json:"last"`
}

// CheckArgs checks a checkpoint's arguments: offset not negative and not
// behind the last one (prev), state within MaxCheckpointState.
func CheckArgs(offset, prev int64, state []byte) error {
	switch {
	case offset < 0:
		return fmt.Errorf("%w: offset %d is negative", ErrCheckpoint, offset)
	case offset < prev:
		return fmt.Errorf("%w: offset %d is behind the last checkpoint's %d", ErrCheckpoint, offset, prev)
	case len(state) > MaxCheckpointState:
		return fmt.Errorf("%w: state of %d bytes is over the %d-byte limit; keep data in outputs", ErrCheckpoint, len(state), MaxCheckpointState)
	}
	return nil
}

const (
	// AttemptContinued: the attempt checkpointed near its executor's time
	// limit and the task continues in a new invocation (a new attempt that
	// spends none of its retries). Not a failure.
	AttemptContinued AttemptEndKind = "continued"
	// TaskResumed is a timeline event, not an attempt end: an attempt
	// started from an earlier attempt's checkpoint.
	TaskResumed AttemptEndKind = "resumed"
)
