package dynamo

import (
	"context"
	"slices"
	"strconv"

	"github.com/batchwork/batchwork/shared/cost"
)

// A batched count carries its job's pending cost on one of its counts
// (the first of the job in the batch). A partition the counter holds
// already was counted elsewhere (a redelivered message's refused claim
// counts it with no cost, ShardEnsureCounted) or by this very write whose
// answer was lost; countBatch then writes the rest without it, and the
// cost must not go with it, nor be added twice. So a count write that
// carries cost also adds a name to the counter's set of cost writes
// (aCostFlushes), derived from the partition it came with: a partition
// is counted by one write only, so the name is that write's. A cost whose
// partition was counted elsewhere moves, with its name, to the first of
// the rest (counted by the rest's write); with no rest, it goes on its
// own under its name (ShardAddCost), which the counter refuses if this
// process's own write took it. A batch carries one job's cost on one
// count (attachCost), so one name covers a write's cost.

// batchCostFlush is the name of the cost the counts ps carry, or "" when
// they carry none.
func batchCostFlush(ps []CommitParams) string {
	for _, p := range ps {
		if p.costFlush != "" {
			return p.costFlush
		}
		if !p.Cost.IsZero() {
			return "cnt" + strconv.Itoa(p.Ref.Partition)
		}
	}
	return ""
}

// moveCost puts the cost of the counts of ps not in rest (counted
// already) on rest[0], with its name; rest holds copies, so ps is left as
// it was.
func moveCost(ps, rest []CommitParams) {
	for _, p := range ps {
		if slices.ContainsFunc(rest, func(r CommitParams) bool { return r.Ref == p.Ref }) {
			continue
		}
		if flush := batchCostFlush([]CommitParams{p}); flush != "" {
			rest[0].Cost.Add(p.Cost)
			rest[0].costFlush = flush
		}
	}
}

// keepBatchCost adds the cost of ps, all counted already, to their
// counter under its name: nothing if this process's count write took it.
// A failed write drops it, as a failed count does: a job's figure may
// miss some cost, never count it twice, and the count it rode on stands.
func (s *Store) keepBatchCost(ctx context.Context, k ShardRef, ps []CommitParams) {
	flush := batchCostFlush(ps)
	if flush == "" {
		return
	}
	var c cost.Counts
	for _, p := range ps {
		c.Add(p.Cost)
	}
	_ = s.ShardAddCost(ctx, k.Job, k.Stage, k.Shard, flush, c)
}
