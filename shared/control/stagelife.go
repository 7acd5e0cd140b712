package control

// The stage lifecycle lives in stages; these names keep their callers'
// spelling.

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/stages"
)

type (
	// OutputClaim is an output folder's claim (stages.OutputClaim).
	OutputClaim = stages.OutputClaim
	// OutputClaimedError refuses a submission whose output folder another
	// job claimed (stages.OutputClaimedError).
	OutputClaimedError = stages.OutputClaimedError
	// PublishError is a publishing failure (stages.PublishError).
	PublishError = stages.PublishError
)

const (
	// MaxInputKey bounds an input object's key (stages.MaxInputKey).
	MaxInputKey = stages.MaxInputKey
	// PlanGiveUp is how long a stage's plan retries (stages.PlanGiveUp).
	PlanGiveUp = stages.PlanGiveUp
	// PublishGiveUp is how long publishing retries (stages.PublishGiveUp).
	PublishGiveUp = stages.PublishGiveUp
	// RelayBudget bounds the materialization of one relay
	// (stages.RelayBudget).
	RelayBudget = stages.RelayBudget
)

// OutputsURI is where the owner's output folders may be
// (stages.Lifecycle.OutputsURI).
func (s *Service) OutputsURI(owner string) string { return s.stages.OutputsURI(owner) }

// MaterializeRelay handles a materialization relay
// (stages.Lifecycle.MaterializeRelay).
func (s *Service) MaterializeRelay(ctx context.Context, r stages.Relay) error {
	return s.stages.MaterializeRelay(ctx, r)
}
