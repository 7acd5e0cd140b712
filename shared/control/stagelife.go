package control

// The stage lifecycle lives in stages; these names keep their callers'
// spelling.

import (
	"context"

	"github.com/batchwork/batchwork/shared/control/stages"
	"github.com/batchwork/batchwork/shared/spec"
	sm "github.com/batchwork/batchwork/statemachine"
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

func (s *Service) startStage(ctx context.Context, job string, sp *spec.Job, idx int) error {
	return s.stages.StartStage(ctx, job, sp, idx)
}

func (s *Service) materialize(ctx context.Context, job string, sp *spec.Job, idx int) error {
	return s.stages.Materialize(ctx, job, sp, idx)
}

func (s *Service) checkStageComplete(ctx context.Context, job string, idx int) error {
	return s.stages.CheckStageComplete(ctx, job, idx)
}

func (s *Service) completeStage(ctx context.Context, job string, idx int) (ended bool, err error) {
	return s.stages.CompleteStage(ctx, job, idx)
}

func (s *Service) afterStageCompleted(ctx context.Context, job string, idx int) error {
	return s.stages.AfterStageCompleted(ctx, job, idx)
}

func (s *Service) failJob(ctx context.Context, job string, idx int, reason string, gen int) error {
	return s.stages.FailJob(ctx, job, idx, reason, gen)
}

func (s *Service) cancelStages(ctx context.Context, job string, gen int) error {
	return s.stages.CancelStages(ctx, job, gen)
}

func (s *Service) resolveOutput(owner string, sp *spec.Job) error {
	return s.stages.ResolveOutput(owner, sp)
}

func (s *Service) checkOutputClaimed(ctx context.Context, owner, idemKey string, sp *spec.Job) error {
	return s.stages.CheckOutputClaimed(ctx, owner, idemKey, sp)
}

func upstreamCompleted(sp *spec.Job, idx int, state func(int) sm.StageState) bool {
	return stages.UpstreamCompleted(sp, idx, state)
}

func unwrittenTotal(sp *spec.Job, idx int) (int, bool) { return stages.UnwrittenTotal(sp, idx) }

func parseRelay(body string) (stages.Relay, bool) {
	return stages.ParseRelay(body)
}

var readClaim = stages.ReadClaim
