package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// Dynamic splitting (spec Input.DynamicSplit), the executor's half: the
// runner of an input task offers to give away the unread rest of its
// split once the attempt has run SplitAfter, and the control plane
// accepts if the task straggles (control/dynsplit.go).
//
// The runner decides when to offer, not the sweep: only the reader knows
// how far it has read, and the cut must lie past that, so the reader is
// held back at the cut until the answer (split.Cut). A sweep-set flag
// seen on heartbeat would need that same exchange afterwards, and a
// heartbeat's reply to carry it; one offer per attempt, after a wait that
// short tasks never reach, costs nothing for tasks that do not straggle.

// DefaultSplitAfter is how long an input task of a dynamicSplit stage
// runs before it offers to split.
const DefaultSplitAfter = time.Minute

// Pieces an offer gives away, and the smallest piece: a task has a fixed
// cost (a claim, a commit, a message, an output object), so a piece must
// carry enough bytes to be worth it.
const (
	splitPieces   = 4
	minSplitPiece = 64 << 10
)

// splittable returns a Cut for the input split s of claim c to be read
// with, or nil when its stage does not split dynamically. A control plane
// that cannot split (ErrUnsupported) refuses the offer (offerSplit).
func (r *Runner) splittable(c control.Claim, in *spec.Input, s split.Split) *split.Cut {
	if !in.DynamicSplit || c.Speculative || split.Compression(s.Key) != "" {
		return nil
	}
	return split.NewCut()
}

// watchSplit offers the task's split once, after SplitAfter, unless the
// attempt ends first. The returned stop waits for an offer under way: the
// attempt commits only once it knows which range it owned.
func (r *Runner) watchSplit(ctx context.Context, c control.Claim, t *Task, abandon context.CancelCauseFunc, log *slog.Logger) (stop func()) {
	if t.cut == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	began := time.Now()
	claim := c // the goroutine's copy: only a splittable attempt's moves to the heap
	go func() {
		defer close(done)
		timer := time.NewTimer(cmp.Or(r.SplitAfter, DefaultSplitAfter))
		defer timer.Stop()
		select {
		case <-quit:
			return
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		// Under the attempt's context, not cut short by stop: the outcome
		// of an offer made must be known before the attempt commits.
		r.offerSplit(ctx, r.CP, claim, t.cut, time.Since(began), abandon, log)
	}()
	return func() { close(quit); <-done }
}

// offerSplit carves the unread rest of the split, holds the reader back at
// the cut, and asks the control plane; the reader goes on to the cut or to
// its old end as the answer says. When the answer is lost (a network
// error) the attempt can read neither range safely, so it is abandoned
// with the reader still held: its lease runs out and the next attempt
// reads what the task record says.
func (r *Runner) offerSplit(ctx context.Context, sp Splitter, c control.Claim, cut *split.Cut, ran time.Duration, abandon context.CancelCauseFunc, log *slog.Logger) {
	start, pos, end, ok := cut.Progress()
	if !ok {
		return
	}
	in := *c.Task.Input
	in.Start, in.End = start, end
	at, give := split.Carve(in, pos, splitPieces, minSplitPiece)
	if len(give) == 0 || !cut.Propose(at) {
		return
	}
	res, err := sp.SplitTask(ctx, c, control.SplitRequest{Input: in, At: at, Give: give, Ran: ran})
	switch {
	case errors.Is(err, control.ErrSplitRefused), errors.Is(err, ErrUnsupported):
		log.Info("split refused", "at", at, "err", err)
		cut.Resolve(false)
	case err != nil:
		log.Warn("split: outcome unknown; abandoning the attempt", "err", err)
		abandon(errSplitUnknown)
	default:
		cut.Resolve(true)
		log.Info("split", "at", at, "gave_bytes", end-at, "first", res.First, "last", res.Last)
	}
}

// errSplitUnknown ends an attempt whose split's outcome is unknown as one
// that lost its lease: it leaves without failing or committing.
var errSplitUnknown = fmt.Errorf("dynamic split outcome unknown: %w", errLeaseLost)
