package tasks

// Claims of a stage whose skewed partitions are split (spec.Skew,
// shared/skew). The stage's extra tasks (a hot partition's pieces, past
// its shuffle's partitions) are unwritten like the others, so their claim
// writes them; the stage's record holds its total, pieces included, from
// before any message was sent. In a combinable stage, the task of a hot
// partition reduces its pieces' outputs: its claim waits until every
// piece has committed, by sending a delayed copy of its message and
// dropping this one (as a claim over a concurrency limit does), so the
// task spends no attempt waiting and cannot start early; a piece, once
// committed, stays committed. The commit of the last piece sends the
// combine task's message at once (wakeCombine).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/skew"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/tracing"
	sm "github.com/batchwork/batchwork/statemachine"
)

// ErrPiecesRunning: a combine task's claim found a piece of its partition
// not yet committed; a delayed copy of its message was sent. It wraps
// domain.ErrAlreadyDone, so the executor drops the message it holds.
var ErrPiecesRunning = errors.New("the pieces of its skewed partition have not all committed")

// PiecesWait is how long a combine task's message waits before its claim
// looks at its pieces again: one second, SQS's smallest delay (delays
// round up to whole seconds, so a jitter under a second would only make
// it two). The wait is most of what a hot partition adds to its stage's
// time, and a look is a read per piece; a stage has few hot partitions.
const PiecesWait = time.Second

// skewPiece reports whether ref is one of its skewed stage's extra tasks,
// whose claim may write it: a partition past the shuffle's, below the
// stage's total (one read, only for a stage with skew).
func skewPiece(ctx context.Context, s *Lifecycle, sp *spec.Job, ref domain.TaskRef, parts int) (bool, error) {
	if sp.Stages[ref.Stage].Skew == nil || ref.Partition < parts {
		return false, nil
	}
	st, err := s.store.StageGet(ctx, ref.Job, ref.Stage)
	if err != nil {
		return false, fmt.Errorf("claim %s: %w", ref, err)
	}
	return ref.Partition < st.Total, nil
}

// combineGate is what a claim of ref waits for, in a combinable skewed
// stage: nothing (nil), or the committed outputs of the pieces of its hot
// partition. While a piece has not committed it resends ref's message
// with a delay and returns ErrPiecesRunning.
func combineGate(ctx context.Context, s *Lifecycle, sp *spec.Job, ref domain.TaskRef) ([]domain.Output, error) {
	st := sp.Stages[ref.Stage]
	if st.Skew == nil || !st.Skew.Combinable {
		return nil, nil
	}
	plan, err := s.skew.plan(ctx, s, sp, ref)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", ref, err)
	}
	var outs []domain.Output
	for _, pc := range plan.Combine(ref.Partition) {
		t, err := s.store.TaskGet(ctx, domain.TaskRef{Job: ref.Job, Stage: ref.Stage, Partition: pc.Task})
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			return nil, fmt.Errorf("claim %s: piece %d: %w", ref, pc.Task, err)
		}
		if err != nil || t.State != sm.TaskSucceeded {
			// An ended job's pieces may never commit: its message goes
			// (the sweep ends its unwritten tasks with the job).
			if state, err := s.CachedJobState(ctx, ref.Job); err != nil {
				return nil, fmt.Errorf("claim %s: %w", ref, err)
			} else if state != sm.JobRunning {
				return nil, fmt.Errorf("claim %s: job is %s: %w", ref, state, domain.ErrAlreadyDone)
			}
			if err := s.Resend(ctx, ref, tracing.SpanID(tracing.Carried(ctx)), PiecesWait); err != nil {
				return nil, fmt.Errorf("claim %s: requeue behind its pieces: %w", ref, err)
			}
			return nil, fmt.Errorf("claim %s: piece %d: %w: %w", ref, pc.Task, ErrPiecesRunning, domain.ErrAlreadyDone)
		}
		for r := range t.Outputs {
			outs = append(outs, domain.Output{Stage: st.Name, Partition: pc.Task, Attempt: t.CommittedAttempt, Part: r,
				Key: blob.OutputKey(ref.Job, st.Name, pc.Task, t.CommittedAttempt, r)})
		}
	}
	return outs, nil
}

// wakeCombine sends the combine task's message at once when ref, a piece
// of a combinable stage's hot partition, has just committed and every
// other piece of its partition has too, so the combine task starts now
// instead of when the delayed copy its refused claim left comes back (up
// to PiecesWait later: most of what a hot partition would add to its
// stage's time). Each piece's committer reads the others after its own
// write, so of pieces committing together at least one sees them all
// (consistent reads); two may send, and the second message's claim finds
// the task claimed or committed, as a duplicate delivery's does. It is
// only a shortcut: a read or a send that fails, or a committer that dies
// first, leaves the combine task to the delayed copies, which still look
// every PiecesWait. A commit reads at most its partition's other pieces
// (MaxPieces), stopping at the first that has not committed.
func (s *Lifecycle) wakeCombine(ctx context.Context, sp *spec.Job, ref domain.TaskRef) {
	st := sp.Stages[ref.Stage]
	if st.Skew == nil || !st.Skew.Combinable {
		return
	}
	if parts, _ := stages.UnwrittenTotal(sp, ref.Stage); ref.Partition < parts {
		return
	}
	plan, err := s.skew.plan(ctx, s, sp, ref)
	if err != nil {
		s.Logger(ref).Warn("wake the combine task: read the skew plan", "err", err)
		return
	}
	piece, ok := plan.PieceOf(ref.Partition)
	if !ok {
		return
	}
	pieces := plan.Combine(piece.Partition)
	// The later pieces are the likelier to be running: look at them first.
	for i := len(pieces) - 1; i >= 0; i-- {
		if pieces[i].Task == ref.Partition {
			continue
		}
		other := domain.TaskRef{Job: ref.Job, Stage: ref.Stage, Partition: pieces[i].Task}
		t, err := s.store.TaskGet(ctx, other)
		if err != nil && !errors.Is(err, domain.ErrNotFound) {
			s.Logger(ref).Warn("wake the combine task: read a piece", "piece", other.String(), "err", err)
		}
		if err != nil || t.State != sm.TaskSucceeded {
			return // that piece's own commit looks again
		}
	}
	combine := domain.TaskRef{Job: ref.Job, Stage: ref.Stage, Partition: piece.Partition}
	m, err := s.Meta(ctx, ref.Job)
	if err != nil {
		s.Logger(ref).Warn("wake the combine task: read its job", "err", err)
		return
	}
	// The message carries a span of the combine task in the job's trace,
	// as materialization's do: the claim it wins writes that span into the
	// task's record (it has none before), and the attempts are its
	// children. The span materialization made for the task is not known
	// here.
	span := tracing.SpanID(tracing.Mark(tracing.Parent(ctx, m.Trace), "batchwork.task",
		tracing.StageKey.String(st.Name), tracing.PartitionKey.Int(piece.Partition)))
	if err := s.Resend(ctx, combine, span, 0); err != nil {
		s.Logger(ref).Warn("wake the combine task: send its message", "combine", combine.String(), "err", err)
	}
}

// skewPlans keeps the skew plans this process has read: a plan is written
// once, so an entry never goes stale. It starts over past maxSkewPlans
// (the plans of running jobs are read again).
type skewPlans struct {
	mu sync.Mutex
	m  map[string]skew.Plan
}

const maxSkewPlans = 1024

func (c *skewPlans) plan(ctx context.Context, s *Lifecycle, sp *spec.Job, ref domain.TaskRef) (skew.Plan, error) {
	key := skew.Key(ref.Job, sp.Stages[ref.Stage].Name)
	c.mu.Lock()
	p, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := skew.Read(ctx, s.blob, ref.Job, sp, ref.Stage)
	if err != nil {
		return skew.Plan{}, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSkewPlans {
		c.m = map[string]skew.Plan{}
	}
	c.m[key] = p
	c.mu.Unlock()
	return p, nil
}

// copyable reports whether a straggling task may get a speculative copy:
// not a task of a combinable skewed stage's partitions, which may be a
// combine task, whose inputs only its own claim lists (a copy's claim
// does not pass combineGate). Its pieces, past the partitions, may.
func copyable(sp *spec.Job, ref domain.TaskRef) bool {
	sk := sp.Stages[ref.Stage].Skew
	if sk == nil || !sk.Combinable {
		return true
	}
	parts, _ := stages.UnwrittenTotal(sp, ref.Stage)
	return ref.Partition >= parts
}
