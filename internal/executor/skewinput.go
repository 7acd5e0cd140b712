package executor

// A stage with skew (spec.Skew) reads its shuffles through its plan
// (shared/skew): a piece of a hot partition reads, of the shuffle it
// splits, the map outputs of its map tasks only, and of every other
// shuffle (a join's other sides) all of the partition; in a combinable
// stage, the hot partition's own task reads its pieces' committed outputs,
// which its claim lists (control.Claim.Combine), in place of the shuffle.

import (
	"context"
	"io"

	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/skew"
	"github.com/batchwork/batchwork/shared/spec"
)

// reduceInput is what task ref reads of shuffle src.
func reduceInput(ctx context.Context, r *Runner, c control.Claim, ref domain.TaskRef, src int) (io.ReadCloser, error) {
	sp := c.Spec
	if sp.Stages[ref.Stage].Skew == nil {
		return r.shuffleInput(ctx, sp, ref, src)
	}
	plan, err := skewPlan(ctx, r, sp, ref)
	if err != nil {
		return nil, err
	}
	if len(plan.Combine(ref.Partition)) > 0 {
		srcs := make([]shuffleSource, len(c.Combine))
		for i, o := range c.Combine {
			srcs[i] = shuffleSource{key: o.Key}
		}
		return &shuffleReader{ctx: ctx, blob: r.Blob, srcs: srcs}, nil
	}
	pc, ok := plan.PieceOf(ref.Partition)
	if !ok {
		return r.shuffleInput(ctx, sp, ref, src)
	}
	part := ref
	part.Partition = pc.Partition
	if src != pc.Source {
		return r.shuffleInput(ctx, sp, part, src) // a join's other side: all of it
	}
	all, err := r.shuffleSources(ctx, sp, part, src)
	if err != nil {
		return nil, err
	}
	var srcs []shuffleSource
	for _, s := range all {
		if pc.Reads(s.task) {
			srcs = append(srcs, s)
		}
	}
	return &shuffleReader{ctx: ctx, blob: r.Blob, part: pc.Partition, readAhead: blob.DefaultShuffleReadAhead, srcs: srcs, cache: &r.indexes}, nil
}

// skewPlan is the plan of ref's stage, read once per runner (it is
// written once, before any of the stage's tasks).
func skewPlan(ctx context.Context, r *Runner, sp *spec.Job, ref domain.TaskRef) (skew.Plan, error) {
	key := skew.Key(ref.Job, sp.Stages[ref.Stage].Name)
	if v, ok := r.skewPlans.Load(key); ok {
		return v.(skew.Plan), nil
	}
	p, err := skew.Read(ctx, r.Blob, ref.Job, sp, ref.Stage)
	if err != nil {
		return skew.Plan{}, err
	}
	r.skewPlans.Store(key, p)
	return p, nil
}
