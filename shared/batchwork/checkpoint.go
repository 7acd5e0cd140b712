package batchwork

import (
	"context"
	"fmt"
	"io"
	"slices"

	"github.com/batchwork/batchwork/shared/domain"
)

// ErrContinue is the cause (context.Cause) with which a task's context
// is cancelled when its executor is about to run out of time: on Lambda,
// a minute before the invocation's 15-minute limit. A function that
// checkpoints should then save a checkpoint and return an error (the
// context's cause will do): the task continues in a new invocation, from
// that checkpoint, without spending an attempt. Returning nil instead
// says the task is complete. Only functions that called Resume or
// Checkpoint are asked; others run until the invocation ends, as before.
var ErrContinue = domain.ErrContinue

// ErrCheckpoint marks a checkpoint that was refused for its arguments or
// because the task cannot checkpoint.
var ErrCheckpoint = domain.ErrCheckpoint

// MaxCheckpointState is the largest state a checkpoint may carry (64
// KiB): counters and cursors; outputs are saved by the runner.
const MaxCheckpointState = domain.MaxCheckpointState

// Checkpoint is a checkpoint's offset and state, for RunTask.
type Checkpoint struct {
	Offset int64
	State  []byte
}

// Checkpoint saves the task's progress, so that a retry of the task (or,
// on Lambda, its continuation in a new invocation) resumes from here
// instead of from the start:
//
//   - offset is how many bytes of Input the function has consumed, up to
//     the end of the last record it has fully processed (a record
//     boundary): a resumed attempt's Input starts at the next byte. It
//     never goes back, and is 0 for a task without Input.
//   - state is whatever else the function needs to go on (a running
//     total, a cursor), at most MaxCheckpointState bytes.
//   - the outputs written so far are saved with it by the runner: a
//     resumed attempt's outputs start with them, so the function writes
//     only what comes after the offset, and the task's final outputs are
//     those of an uninterrupted run.
//
// A function that checkpoints should call Resume before writing any
// output. An error wrapping a lost claim means another attempt owns the
// task: this one's checkpoint will never be used and its context is
// cancelled; the function should return.
func (t *Task) Checkpoint(ctx context.Context, offset int64, state []byte) error {
	if t.rt != nil {
		return t.rt.Checkpoint(ctx, offset, state)
	}
	if t.ckpt == nil {
		t.ckpt = &memCheckpoints{}
	}
	return t.ckpt.save(offset, state)
}

// Resume returns the checkpoint this attempt resumes from: the offset
// at which Input now starts, the state saved with it, and true; or false
// when the task starts afresh. A checkpoint saved by an attempt that had
// lost its claim by then is never resumed from.
func (t *Task) Resume() (offset int64, state []byte, ok bool) {
	if t.rt != nil {
		return t.rt.Resume()
	}
	if t.ckpt == nil || t.ckpt.from == nil {
		return 0, nil, false
	}
	return t.ckpt.from.Offset, slices.Clone(t.ckpt.from.State), true
}

// memCheckpoints is RunTask's record of Checkpoint calls.
type memCheckpoints struct {
	from  *Checkpoint
	saved []Checkpoint
}

func (m *memCheckpoints) save(offset int64, state []byte) error {
	prev := int64(0)
	switch {
	case len(m.saved) > 0:
		prev = m.saved[len(m.saved)-1].Offset
	case m.from != nil:
		prev = m.from.Offset
	}
	if err := domain.CheckArgs(offset, prev, state); err != nil {
		return err
	}
	m.saved = append(m.saved, Checkpoint{Offset: offset, State: slices.Clone(state)})
	return nil
}

// runTaskResume starts t from in.Resume, as an executor resumes a task:
// its Input skips the checkpoint's offset.
func runTaskResume(t *Task, in TaskInput) error {
	t.ckpt = &memCheckpoints{}
	if in.Resume == nil {
		return nil
	}
	t.ckpt.from = &Checkpoint{Offset: in.Resume.Offset, State: slices.Clone(in.Resume.State)}
	if in.Resume.Offset == 0 {
		return nil
	}
	if t.Input == nil {
		return fmt.Errorf("resume at offset %d: the task has no Input", in.Resume.Offset)
	}
	if n, err := io.CopyN(io.Discard, t.Input, in.Resume.Offset); err != nil {
		return fmt.Errorf("resume at offset %d: Input ends at %d: %w", in.Resume.Offset, n, err)
	}
	return nil
}
