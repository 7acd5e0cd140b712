package control

// The sweep lives in sweep; these names keep their callers' spelling.

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/control/sweep"
)

const (
	// DeadlineReason is the error of a job failed by its deadline.
	DeadlineReason = sweep.DeadlineReason
	// SweepStepBudget caps the time of one step of a sweep run
	// (sweep.SweepStepBudget).
	SweepStepBudget = sweep.SweepStepBudget
	// SweepBackoffMax caps how far the sweep pushes a stage's next look
	// (sweep.SweepBackoffMax).
	SweepBackoffMax = sweep.SweepBackoffMax
)

var (
	// ErrStepPanicked: a sweep step panicked; the run went on without it.
	ErrStepPanicked = sweep.ErrStepPanicked
	// ErrStepOverBudget: a sweep step did not return within its budget.
	ErrStepOverBudget = sweep.ErrStepOverBudget
)

// Sweep runs one sweep (sweep.Sweeper.Sweep). It stays declared here:
// the schedules' own Sweep, a step of this one, would otherwise be
// promoted in its place.
func (s *Service) Sweep(ctx context.Context) (SweepCounts, error) { return s.sweeper.Sweep(ctx) }

var (
	_ sweep.Store = kernel.Store(nil)
	_ sweep.Queue = kernel.Queue(nil)
)
