package executor

// Checkpoints of lambda stages' functions (shared/lambdatask's package
// doc, Checkpoints): the Go API's Task.Checkpoint and Task.Resume
// (checkpoint.go) for a function the executor invokes. A fenced attempt's
// checkpoint is refused and never used, and the attempt stops.

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/lambdatask"
)

// lambdaCheckpointEvent fills the event's resume point and checkpoint
// outputs, and, once the task's outputs are segments, points its outputs
// at them.
func lambdaCheckpointEvent(ev *lambdatask.Event, t *Task) {
	k := t.ck
	if k == nil {
		return
	}
	k.mu.Lock()
	if k.seq > 0 || k.from != nil {
		ev.Resume = &lambdatask.Resume{Offset: k.offset, State: slices.Clone(k.state)}
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
func (r *Runner) lambdaOutcome(ctx context.Context, ev *lambdatask.Event, t *Task, resp *lambdatask.Response) (bool, error) {
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
