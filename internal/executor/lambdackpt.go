package executor

// Checkpoints of lambda stages' functions: the Go API's Task.Checkpoint
// and Task.Resume (checkpoint.go) for a function the executor invokes, so
// that a partition longer than one invocation (Lambda's 15 minutes) can
// finish, and a retry resumes where the last attempt's checkpoint was.
//
// The event carries, besides outputs:
//   - resume {offset, state}: the latest checkpoint of the task (of an
//     earlier attempt, or of this attempt's previous invocation), when
//     there is one: read the input from offset on (counted from the first
//     byte of the task's input, input.start for a split), with state
//     (base64 in JSON). Absent: start afresh.
//   - checkpointOutputs: one key per output partition, where an
//     invocation that will checkpoint writes its outputs. Once the task
//     has checkpointed (or resumed), outputs are these keys too.
//
// The response may carry checkpoint {offset, state}: "save this and
// invoke me again from it". The executor then, as for a Go function:
// takes the outputs the response names (written to checkpointOutputs) as
// the task's sealed segments, writes the checkpoint record, and points
// the task at it conditional on the attempt's claim (a fenced attempt's
// checkpoint is refused and never used, and the attempt stops); only
// then does it invoke the function again, with the new resume point and
// fresh checkpointOutputs. The rejects of a response with a checkpoint go
// with it (a retry resuming from it keeps them). A response without a
// checkpoint ends the attempt: the executor publishes each output object
// as the concatenation of its segments in order (byte for byte what an
// uninterrupted run would have written) and commits.
//
// The limits are the Go API's: the offset is not negative nor behind the
// last checkpoint, the state at most domain.MaxCheckpointState bytes; and
// each checkpoint must make progress (a further offset or a new state),
// so a function cannot keep the executor invoking it for ever.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/batchwork/batchwork/shared/domain"
)

// LambdaResume is where a lambda stage's function resumes.
type LambdaResume struct {
	Offset int64  `json:"offset"`
	State  []byte `json:"state"` // base64 in JSON
}

// LambdaCheckpoint is a checkpoint a function's response asks for.
type LambdaCheckpoint struct {
	Offset int64  `json:"offset"`
	State  []byte `json:"state,omitempty"` // base64 in JSON
}

// lambdaCheckpointEvent fills the event's resume point and checkpoint
// outputs, and, once the task's outputs are segments, points its outputs
// at them.
func lambdaCheckpointEvent(ev *LambdaEvent, t *Task) {
	k := t.ck
	if k == nil {
		return
	}
	k.mu.Lock()
	if k.seq > 0 || k.from != nil {
		ev.Resume = &LambdaResume{Offset: k.offset, State: slices.Clone(k.state)}
		if ev.Resume.State == nil {
			ev.Resume.State = []byte{}
		}
	}
	k.mu.Unlock()
	keys, active := t.Out.SegmentKeys()
	if keys == nil {
		return
	}
	ev.CheckpointOutputs = keys
	if active {
		ev.Outputs = ev.CheckpointOutputs
	}
}

// lambdaOutcome checks a response's outputs and, with a checkpoint, saves
// it: true when the function is to be invoked again from it.
func (r *Runner) lambdaOutcome(ctx context.Context, ev *LambdaEvent, t *Task, resp *LambdaResponse) (bool, error) {
	err := r.checkLambdaOutputs(ctx, ev, resp.Outputs)
	toSegments := err == nil && ev.CheckpointOutputs != nil && slices.Equal(ev.Outputs, ev.CheckpointOutputs)
	if err != nil && ev.CheckpointOutputs != nil && !slices.Equal(ev.Outputs, ev.CheckpointOutputs) {
		alt := *ev
		alt.Outputs = ev.CheckpointOutputs
		if r.checkLambdaOutputs(ctx, &alt, resp.Outputs) == nil {
			err, toSegments = nil, true
		}
	}
	if err != nil {
		return false, err
	}
	if resp.Checkpoint != nil && len(resp.Outputs) > 0 && !toSegments {
		return false, fmt.Errorf("response checkpoint: the outputs of an invocation that checkpoints go to the event's checkpointOutputs, not its outputs")
	}
	if toSegments && len(resp.Outputs) > 0 {
		parts := make([]int, len(resp.Outputs))
		for i, out := range resp.Outputs {
			parts[i] = out.Part
		}
		if err := t.Out.TakeSegments(parts); err != nil {
			return false, err
		}
	}
	if resp.Checkpoint == nil {
		return false, nil
	}
	k := t.ck
	if k == nil {
		return false, fmt.Errorf("response checkpoint: %w: this task cannot checkpoint (a control plane without checkpoints)", domain.ErrCheckpoint)
	}
	ck := resp.Checkpoint
	k.mu.Lock()
	same := (k.seq > 0 || k.from != nil) && ck.Offset == k.offset && bytes.Equal(ck.State, k.state)
	k.mu.Unlock()
	if same {
		return false, fmt.Errorf("response checkpoint: %w: offset %d and state are the last checkpoint's; a checkpoint must make progress", domain.ErrCheckpoint, ck.Offset)
	}
	if k.c.Speculative {
		// A speculative copy's checkpoints are not saved (checkpointer.Save),
		// but it must still go on from them: its segments are sealed and
		// its next invocation resumes here, in this attempt only.
		k.mu.Lock()
		defer k.mu.Unlock()
		if err := domain.CheckArgs(ck.Offset, k.offset, ck.State); err != nil {
			return false, fmt.Errorf("response checkpoint: %w", err)
		}
		if err := t.Out.EnterSegments(nil); err != nil {
			return false, fmt.Errorf("response checkpoint: %w", err)
		}
		seq, _, err := t.Out.Seal(ctx, r.Blob)
		if err != nil {
			return false, fmt.Errorf("response checkpoint: seal outputs: %w", err)
		}
		k.seq, k.offset, k.state = seq, ck.Offset, slices.Clone(ck.State)
		return true, nil
	}
	if err := k.Save(ctx, ck.Offset, ck.State); err != nil {
		return false, fmt.Errorf("response checkpoint: %w", err)
	}
	t.Log.Info("lambda function checkpointed; invoking it again from the checkpoint", "offset", ck.Offset)
	return true, nil
}
