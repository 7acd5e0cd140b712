package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	sm "github.com/batchwork/batchwork/statemachine"
)

// Checkpoints inside a partition (Task.Checkpoint, Task.Resume).
//
// A checkpoint is an offset in the task's input (bytes of Task.Input the
// function has consumed, on a record boundary), a small state blob, and
// the outputs written so far. The runner saves it in three steps:
//
//  1. it seals the attempt's outputs so far as immutable segment objects
//     (blob.SegmentKey: a streamed partition's open upload is completed
//     there, a buffered one put whole);
//  2. it writes the checkpoint record, naming the segments, to
//     blob.CheckpointKey (If-None-Match: *);
//  3. it points the task record at it, conditional on the attempt's
//     claim token (sm.TaskCheckpoint).
//
// Only step 3 makes a checkpoint usable, and only the holder of the
// current claim can take it: a stale attempt's write is refused, its task
// context cancelled as for a lost lease, and its record and segments are
// never read. A later attempt (a retry, a takeover, a continuation)
// starts from the task's last checkpoint: its outputs start as the
// checkpoint's segments, its input skips the checkpoint's offset, and
// Resume gives the function the offset and state.
//
// An attempt that checkpoints (or resumed) writes its outputs as
// segments, never straight to its output objects: when it publishes, it
// seals the rest and assembles each output object from its segments (one
// server-side copy for a single segment, else a streamed copy). So the
// published object is written once, by the attempt that commits, and a
// resumed task's outputs are byte for byte those of an uninterrupted
// run: the segments before the checkpoint, then what the function wrote
// after it. What a task costs for this: its outputs are copied once more.

// checkpointTimeout bounds one checkpoint's writes, which run on even
// when the task's context was cancelled to make it checkpoint.
const checkpointTimeout = 2 * time.Minute

// checkpointer is one attempt's checkpoints.
type checkpointer struct {
	r       *Runner
	c       control.Claim
	t       *Task
	cp      Checkpointer
	taskCtx context.Context
	cancel  context.CancelCauseFunc
	log     *slog.Logger

	mu    sync.Mutex
	from  *domain.Checkpoint // resumed from; nil: the task started afresh
	aware bool               // the function called Resume or Checkpoint
	seq   int                // checkpoints this attempt saved
	// offset and state are the last checkpoint's (resumed or saved).
	offset int64
	state  []byte
	// asked: the continuation deadline passed and the task was asked to
	// continue (domain.ErrContinue).
	asked bool
	// read counts the input read so far (nil: the task has no input);
	// lambda: a lambda stage's function reads its input itself.
	read   *readCount
	lambda bool
}

// readCount counts the bytes read through it; read from another
// goroutine (an exec program's checkpoint line) than the one reading.
type readCount struct {
	r io.Reader
	n atomic.Int64
}

func (c *readCount) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// checkRead refuses an offset past the input read so far: a resume from
// it could never skip that far, so every later attempt would fail.
func (k *checkpointer) checkRead(offset int64) error {
	switch {
	case k.lambda || offset == 0:
		return nil
	case k.read == nil:
		return fmt.Errorf("%w: offset %d, but the task has no input; a task without input checkpoints at offset 0", domain.ErrCheckpoint, offset)
	case offset > k.read.n.Load():
		return fmt.Errorf("%w: offset %d is past the %d bytes of input read so far", domain.ErrCheckpoint, offset, k.read.n.Load())
	}
	return nil
}

// Checkpoint saves the task's progress: offset bytes of Input consumed
// (on a record boundary), state (at most domain.MaxCheckpointState bytes)
// and the outputs written so far. A retry or continuation of the task
// starts from the last checkpoint saved. It may be called after the
// task's context was cancelled with domain.ErrContinue, and must be, to
// continue. An error wrapping domain.ErrStaleClaim means the attempt lost
// its claim: its checkpoint will never be used and the task must stop.
func (t *Task) Checkpoint(ctx context.Context, offset int64, state []byte) error {
	if t.ck == nil {
		return fmt.Errorf("%w: this task cannot checkpoint (a control plane without checkpoints)", domain.ErrCheckpoint)
	}
	return t.ck.Save(ctx, offset, state)
}

// Resume returns the checkpoint the task resumes from: its offset (Input
// already starts there) and state, and false when the task starts
// afresh. A function that checkpoints calls it before writing outputs.
func (t *Task) Resume() (offset int64, state []byte, ok bool) {
	if t.ck == nil {
		return 0, nil, false
	}
	return t.ck.resume()
}

// startCheckpoints gives a claimed attempt its checkpointer and, when the
// task has a checkpoint of an earlier attempt, resumes from it: outputs
// from its segments, input from its offset. Input must be the stream the
// function reads (after the runner's own wrappers), so skipped records
// are counted as read. A task whose control plane cannot checkpoint
// (CanCheckpoint) gets none.
func (r *Runner) startCheckpoints(taskCtx context.Context, c control.Claim, t *Task, cancel context.CancelCauseFunc, log *slog.Logger) error {
	cp := r.CP
	if cp.CanCheckpoint() != nil {
		return nil
	}
	// A lambda stage's function reads its input itself: its resume point
	// goes in its event (lambdackpt.go), the input is not skipped here.
	isLambda := c.Spec.Stages[c.Task.Ref.Stage].Lambda != ""
	k := &checkpointer{r: r, c: c, t: t, cp: cp, taskCtx: taskCtx, cancel: cancel, log: log, lambda: isLambda}
	t.ck = k
	if t.Input != nil && !isLambda {
		// Counts what the function (or a program's stdin) has read,
		// the skipped bytes of a resume included: no checkpoint may
		// claim more.
		k.read = &readCount{r: t.Input}
		t.Input = k.read
	}
	ref := c.Task.Ref
	stage := c.StageName()
	attempt := c.Task.Attempt // not c: a closure over it would move the claim to the heap
	seg := func(seq, p int) string {
		return blob.SegmentKey(ref.Job, stage, ref.Partition, attempt, seq, p)
	}
	t.Out.AllowSegments(seg)
	ck := c.Task.Checkpoint
	if !ck.Saved() || ck.Attempt >= c.Task.Attempt {
		return nil
	}
	body, err := r.Blob.Get(taskCtx, blob.CheckpointKey(ref.Job, stage, ref.Partition, ck.Attempt, ck.Seq))
	if err != nil {
		return fmt.Errorf("resume from checkpoint %d of attempt %d: %w", ck.Seq, ck.Attempt, err)
	}
	var from domain.Checkpoint
	if err := json.Unmarshal(body, &from); err != nil {
		return fmt.Errorf("resume from checkpoint %d of attempt %d: %w", ck.Seq, ck.Attempt, err)
	}
	if err := checkRecord(&from, ck, blob.TaskCheckpointsPrefix(ref.Job, stage, ref.Partition)); err != nil {
		return fmt.Errorf("resume from checkpoint %d of attempt %d: %w", ck.Seq, ck.Attempt, err)
	}
	if err := t.Out.EnterSegments(&from); err != nil {
		return fmt.Errorf("resume from checkpoint %d of attempt %d: %w", ck.Seq, ck.Attempt, err)
	}
	t.Rejects.Resume(&from)
	if from.Offset > 0 && !isLambda {
		if t.Input == nil {
			return fmt.Errorf("resume from checkpoint %d of attempt %d: offset %d, but the task has no input", ck.Seq, ck.Attempt, from.Offset)
		}
		// A read, not a ranged GET: the offset is in the stream the
		// function reads (decompressed, without a CSV header), which only
		// reading maps onto the object.
		n, err := io.CopyN(io.Discard, t.Input, from.Offset)
		if err != nil {
			return fmt.Errorf("resume from checkpoint %d of attempt %d: skip to offset %d: input ends at %d: %w", ck.Seq, ck.Attempt, from.Offset, n, err)
		}
	}
	k.from, k.offset, k.state = &from, from.Offset, from.State
	log.Info("resuming from a checkpoint", "checkpoint_attempt", ck.Attempt, "seq", ck.Seq, "offset", from.Offset)
	cp.NoteResumed(taskCtx, c)
	return nil
}

// checkRecord holds a checkpoint record read back to the task's pointer
// and its segments to the task's own checkpoint prefix. Its key is
// predictable, and a record found there is taken as written (the write
// is If-None-Match, its refusal read as an earlier write of its own): one
// planted by anything else that may write the job area must not make
// the executor copy arbitrary keys, with its own read access, into the
// job's outputs.
func checkRecord(from *domain.Checkpoint, ck domain.CheckpointRef, prefix string) error {
	if from.Attempt != ck.Attempt || from.Seq != ck.Seq || from.Offset != ck.Offset {
		return fmt.Errorf("%w: the record is checkpoint %d of attempt %d at offset %d, the task's pointer names checkpoint %d of attempt %d at offset %d",
			domain.ErrCheckpoint, from.Seq, from.Attempt, from.Offset, ck.Seq, ck.Attempt, ck.Offset)
	}
	for r, out := range from.Outputs {
		for _, key := range out.Segments {
			if !strings.HasPrefix(key, prefix) {
				return fmt.Errorf("%w: output partition %d's segment %q is not under the task's checkpoints (%s)", domain.ErrCheckpoint, r, truncate(key, 200), prefix)
			}
		}
	}
	return nil
}

func (k *checkpointer) resume() (int64, []byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.aware = true
	if !k.t.Out.CanSegment() {
		return 0, nil, false
	}
	if err := k.t.Out.EnterSegments(nil); err != nil {
		k.log.Warn("outputs stream before Resume: checkpoints will be refused", "err", err)
	}
	if k.from == nil {
		return 0, nil, false
	}
	return k.from.Offset, slices.Clone(k.from.State), true
}

func (k *checkpointer) Save(ctx context.Context, offset int64, state []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.aware = true
	if err := domain.CheckArgs(offset, k.offset, state); err != nil {
		return err
	}
	if err := k.checkRead(offset); err != nil {
		return err
	}
	// A speculative copy saves its checkpoints too, fenced by its own
	// token: the control plane records them once its holder yielded the
	// task to it, and while the holder runs beside it leaves the task's
	// checkpoint the holder's (control.Service.Checkpoint).
	if cause := context.Cause(k.taskCtx); cause != nil && !errors.Is(cause, domain.ErrContinue) {
		return fmt.Errorf("checkpoint: the attempt is stopping: %w", cause)
	}
	// The writes run on when the task's context was cancelled to make it
	// checkpoint (ErrContinue), within their own bound.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointTimeout)
	defer cancel()
	o := k.t.Out
	if !o.CanSegment() {
		return fmt.Errorf("%w: this task's outputs cannot be checkpointed", domain.ErrCheckpoint)
	}
	if err := o.EnterSegments(nil); err != nil {
		return err
	}
	seq, outs, err := o.Seal(ctx, k.r.Blob)
	if err != nil {
		return fmt.Errorf("checkpoint: seal outputs: %w", err)
	}
	ref := k.c.Task.Ref
	rec := domain.Checkpoint{Attempt: k.c.Task.Attempt, Seq: seq, Offset: offset, State: state, Outputs: outs,
		BadRecords: k.t.Rejects.Records(), BadRecordCount: k.t.Rejects.Count()}
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	key := blob.CheckpointKey(ref.Job, k.c.StageName(), ref.Partition, rec.Attempt, seq)
	if err := k.r.Blob.PutIfAbsent(ctx, key, body); err != nil && !errors.Is(err, domain.ErrExists) {
		return fmt.Errorf("checkpoint: write %s: %w", key, err)
	}
	err = k.cp.Checkpoint(ctx, k.c, seq, offset)
	if errors.Is(err, domain.ErrStaleClaim) {
		// Another attempt holds the task: this one's work will never be
		// used, so it stops as if its lease were lost.
		k.cancel(errLeaseLost)
		k.cp.CheckpointRefused(ctx, k.c, seq) // its record and segments expire
	}
	if errors.Is(err, ErrUnsupported) {
		return fmt.Errorf("%w: this task cannot checkpoint (%w)", domain.ErrCheckpoint, err)
	}
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	k.seq, k.offset, k.state = seq, offset, slices.Clone(state)
	return nil
}

// progressed reports whether the attempt saved a checkpoint beyond the
// one it started from: further in its input, or (for a task without
// input) with a new state. A continuation needs it, so a task that never
// progresses cannot continue for ever.
func (k *checkpointer) progressed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.seq == 0 {
		return false
	}
	if k.from == nil {
		return k.offset > 0 || len(k.state) > 0
	}
	return k.offset > k.from.Offset || !bytes.Equal(k.state, k.from.State)
}

// armContinue asks the task to checkpoint and return (cancelling its
// context with domain.ErrContinue) when ctx's deadline is within the
// continuation margin, if the host set one (feed.WithContinueMargin). A task
// that never called Resume or Checkpoint is left alone: it cannot
// continue, and stopping it early would only fail it sooner.
func (k *checkpointer) armContinue(ctx context.Context) (stop func()) {
	margin, ok := feed.ContinueMarginFrom(ctx)
	dl, has := ctx.Deadline()
	if k == nil || !ok || !has || time.Until(dl) <= margin {
		// An invocation that starts the task inside its margin (a host
		// with a timeout shorter than it) would ask before any work:
		// the task runs as it would without continuations.
		return func() {}
	}
	tm := time.AfterFunc(time.Until(dl)-margin, func() {
		k.mu.Lock()
		ask := k.aware
		k.asked = ask
		k.mu.Unlock()
		if ask {
			k.log.Info("invocation deadline near: asking the task to checkpoint and continue", "margin", margin.String())
			k.cancel(domain.ErrContinue)
		}
	})
	return func() { tm.Stop() }
}

// continueTask ends an attempt the runner asked to continue and whose
// function returned an error (the ErrContinue it was cancelled with, as
// a rule): with progress checkpointed, the task is handed on to a new
// invocation at once, spending no attempt; without, the attempt fails
// like any other, and its retry resumes from the last checkpoint.
func (r *Runner) continueTask(ctx context.Context, c control.Claim, k *checkpointer, runErr error, log *slog.Logger) feed.Result {
	if !k.progressed() {
		return r.fail(ctx, c, fmt.Errorf("invocation time limit near and no progress checkpointed in this invocation: %w", runErr), log)
	}
	k.mu.Lock()
	offset := k.offset
	k.mu.Unlock()
	d, err := k.cp.Continue(ctx, c, offset)
	switch {
	case err == nil && d.Retry:
		// No fresh message was sent: this one comes back at once.
		log.Info("task continues in a new invocation", "offset", offset)
		return feed.Result{Action: feed.Hide, Delay: 0, Err: domain.ErrContinue}
	case err == nil:
		log.Info("task continues in a new invocation", "offset", offset)
		return feed.Result{Action: feed.Delete, Err: domain.ErrContinue}
	case errors.Is(err, domain.ErrStaleClaim):
		return feed.Result{Action: feed.Leave, Err: err}
	case errors.Is(err, control.ErrNoCheckpoints), errors.Is(err, ErrUnsupported):
		return r.fail(ctx, c, runErr, log)
	}
	if errors.Is(err, sm.ErrInvalidTransition) {
		// Refused by a guard (no continuations left): an ordinary
		// failure, which spends an attempt.
		return r.fail(ctx, c, fmt.Errorf("cannot continue in a new invocation: %w", err), log)
	}
	return feed.Result{Action: feed.Leave, Err: err}
}

// askedToContinue reports whether the runner asked the attempt to
// continue in a new invocation.
func (k *checkpointer) askedToContinue() bool {
	if k == nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.asked
}

// expire marks a committed task's checkpoints (records and segments, of
// every attempt) for the bucket's lifecycle rule to expire: the task's
// outputs are its committed attempt's objects now, and no attempt will
// resume again. Best effort, like marking an ended attempt's outputs: a
// leftover costs storage until the job's data is deleted.
func (k *checkpointer) expire(ctx context.Context) {
	if k == nil {
		return
	}
	k.mu.Lock()
	used := k.seq > 0 || k.from != nil
	k.mu.Unlock()
	if !used {
		return
	}
	ref := k.c.Task.Ref
	_, err := k.r.Blob.MarkUncommitted(ctx, blob.TaskCheckpointsPrefix(ref.Job, k.c.StageName(), ref.Partition))
	if err != nil && !errors.Is(err, ErrUnsupported) {
		k.log.Warn("mark a committed task's checkpoints for expiry", "err", err)
	}
}
