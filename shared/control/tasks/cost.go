package tasks

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/cost/meter"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// What a job cost (shared/cost).
//
// The process's meter (Config.Meter) counts the requests it makes for each
// job; the counts go to the store with the job's next count on a stage
// counter shard, in the same conditional write (dynamo/cost.go): a commit
// counted in its transaction takes them before it (takeCost), a batch of
// counts when it is written (attachCost); and the follow-up of a stage's
// last count, which completes the stage (its manifests, the stages after
// it, the job's end), adds what it made to the shard it emptied, in one
// more write per stage (flushCost). A write that fails gives them
// back when it wrote nothing; otherwise they are dropped rather than
// risk counting them twice. Requests a process makes for a job after that (publication,
// a sweep's repairs of an ended job) stay with the meter: the job's figure
// leaves them out.

// spendAttempt adds an attempt's run time, claim to now, to its job's
// compute, by the executor size it ran on.
func (s *Lifecycle) spendAttempt(c kernel.Claim, now time.Time) {
	d := attemptDuration(c, now) // speculation.go
	if d <= 0 || s.cfg.Meter == nil {
		return
	}
	mem := c.Task.Memory
	if c.Spec != nil && c.Task.Ref.Stage < len(c.Spec.Stages) {
		mem = max(mem, c.Spec.StageMemory(c.Task.Ref.Stage))
	}
	secs := d.Seconds()
	s.cfg.Meter.Put(c.Task.Ref.Job, cost.Counts{ComputeSeconds: secs, GBSeconds: secs * float64(mem) / (1 << 30)})
}

// takeCost gives a commit counted in its own write the job's pending
// counts. giveBack returns them when the commit was refused, which wrote
// nothing; after any other error the count may have been written (a lost
// answer), so they are dropped: a job's figure may miss some, never count
// them twice.
func (s *Lifecycle) takeCost(p *dynamo.CommitParams) {
	if !p.DeferCount {
		p.Cost = s.cfg.Meter.Take(p.Ref.Job)
	}
}

func (s *Lifecycle) giveBack(p dynamo.CommitParams, err error) {
	if errors.Is(err, domain.ErrStaleClaim) || errors.Is(err, domain.ErrAlreadyDone) {
		s.cfg.Meter.Put(p.Ref.Job, p.Cost)
	}
}

// attachCost gives each job's first count in a batch the job's pending
// counts. A failed batch drops them, as a failed commit does. The batch's
// own write is its job's cost when it holds one job's counts: it returns
// ctx so.
func (s *Lifecycle) attachCost(ctx context.Context, ps []dynamo.CommitParams) context.Context {
	seen := map[string]bool{}
	for i := range ps {
		if job := ps[i].Ref.Job; !seen[job] {
			seen[job] = true
			ps[i].Cost = s.cfg.Meter.Take(job)
		}
	}
	if len(seen) == 1 {
		ctx = meter.WithJob(ctx, ps[0].Ref.Job)
	}
	return ctx
}

// flushCost adds the job's pending counts to a counter shard its stage
// emptied: the requests of the stage's follow-up. The write is named, so a
// retry of a lost answer adds nothing twice; a failed one drops them.
func (s *Lifecycle) flushCost(ctx context.Context, job string, stage, shard int) {
	c := s.cfg.Meter.Take(job)
	if c.IsZero() {
		return
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	if err := s.store.ShardAddCost(ctx, job, stage, shard, hex.EncodeToString(id[:]), c); err != nil {
		s.Logger(domain.TaskRef{Job: job, Stage: stage}).Warn("a stage follow-up's cost", "err", err)
	}
}
