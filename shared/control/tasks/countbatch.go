package tasks

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/tuning"
)

// Batched counts.
//
// A commit is the task's guarded write, then its count on its stage's
// counter shard (dynamo/count.go). An executor process that commits many
// tasks can count them together: with Config.CountLinger set, a commit
// returns once its task is committed, and its count waits up to that long
// for the counts of other tasks of the same counter (neighbouring
// partitions share one: dynamo.ShardOf), then goes with them in one write.
// That is one write per batch instead of one per task: the request and
// the write unit that a commit's count costs, divided by the batch.
//
// Nothing is lost when the process dies with counts pending: each of
// those tasks is committed and uncounted, which is the crash the sweep
// repairs anyway (its chunk's ready marker, or its own index entry, finds
// it and the sweep counts it; a refused claim of its redelivered message
// counts it at once). A stage's completion is the flush's follow-up, as it
// is a synchronous committer's.
//
// Processes that cannot flush after they answer (an API Lambda, frozen
// between invocations) leave CountLinger at zero: their commits count
// before they return. An executor Lambda flushes before its invocation
// ends (FlushCounts).
type countBatcher struct {
	svc    *Lifecycle
	linger time.Duration

	mu      sync.Mutex
	pending []dynamo.CommitParams
	timer   *time.Timer
	// flushing serializes flushes, so FlushCounts returns after every
	// count handed in before it was called is written.
	flushing sync.Mutex
	// failed is the error of a write that FlushCounts has not reported
	// yet (guarded by flushing): a timer's flush may take counts whose
	// messages the next FlushCounts is about to let go.
	failed error
}

// countBatchMax flushes at once when this many counts are pending
// (tuning.CountBatchMax says why so many).
const countBatchMax = tuning.CountBatchMax

// flushFull says whether pending counts are enough to write before the
// linger (or a delete round's FlushCounts) comes: once, as the batch
// reaches countBatchMax, not once per count past it.
func flushFull(pending int) bool { return pending == countBatchMax }

func (b *countBatcher) add(p dynamo.CommitParams) {
	b.mu.Lock()
	b.pending = append(b.pending, p)
	// One flush when the batch fills, else one when the first count has
	// waited linger.
	full := flushFull(len(b.pending))
	if b.timer == nil && !full {
		b.timer = time.AfterFunc(b.linger, func() { b.flushBackground() })
	}
	b.mu.Unlock()
	if full {
		go b.flushBackground()
	}
}

// flushBackground is a flush of the batcher's own, bounded in time. Its
// failure waits for the next FlushCounts to report it.
func (b *countBatcher) flushBackground() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	zero, _ := b.write(ctx, false) // logged there, reported by FlushCounts
	b.followUp(ctx, zero)
}

// flush writes every pending count and does the follow-up of each stage
// whose counter it emptied.
// It reports the failure of any write since the last report, its own or
// a timer's, which may have held counts of the messages its caller is
// about to let go.
func (b *countBatcher) flush(ctx context.Context) error {
	zero, err := b.write(ctx, true)
	b.followUp(ctx, zero)
	return err
}

// followUp does the follow-up of each stage whose counter zero emptied.
// It runs after the flush's lock: a flush that waits for the counts
// (before messages are deleted) does not wait for another's manifests.
func (b *countBatcher) followUp(ctx context.Context, zero []dynamo.ShardRef) {
	for _, k := range zero {
		// Left undone, it is the sweep's after FollowUpGrace.
		if ferr := b.svc.afterShardDone(meter.WithJob(ctx, k.Job), k.Job, k.Stage, k.Shard); ferr != nil {
			b.svc.log.Warn("stage follow-up after batched counts", "job_id", k.Job, "stage", k.Stage, "err", ferr)
		}
	}
}

// write writes every pending count and returns the counters it emptied,
// and, when report is set, the failures not reported yet.
func (b *countBatcher) write(ctx context.Context, report bool) (zero []dynamo.ShardRef, err error) {
	b.flushing.Lock()
	defer b.flushing.Unlock()
	b.mu.Lock()
	ps := b.pending
	b.pending = nil
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	if len(ps) > 0 {
		ctx = b.svc.attachCost(ctx, ps) // cost.go
		if zero, err = b.svc.store.ShardCountCommits(ctx, ps); err != nil {
			// The tasks are committed; the sweep counts those this
			// missed, or their claims when their messages come back
			// (the executor keeps them when a flush fails).
			b.svc.log.Warn("batched counts", "tasks", len(ps), "err", err)
			b.failed = errors.Join(b.failed, err)
		}
	}
	if !report {
		return zero, nil
	}
	err, b.failed = b.failed, nil
	return zero, err
}

// FlushCounts writes the counts of this process's commits that wait for
// their batch (Config.CountLinger), and completes the stages they finish.
// An executor calls it before it stops or freezes.
func (s *Lifecycle) FlushCounts(ctx context.Context) error {
	if s.counts == nil {
		return nil
	}
	return s.counts.flush(ctx)
}
