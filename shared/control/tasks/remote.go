package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/split"
)

// RemoteClaimRequest asks for a claim on behalf of a remote executor.
type RemoteClaimRequest struct {
	Task string `json:"task"`
}

// RemoteClaim is a claim as a remote executor holds it.
type RemoteClaim struct {
	Task    string        `json:"task"`
	Token   string        `json:"token"`
	Attempt int           `json:"attempt"`
	Lease   time.Duration `json:"leaseNanos"`
	Input   *split.Split  `json:"input,omitempty"`
	// Speculative: the claim is a speculative copy's (a message whose
	// body ends in batch.CopyMarker; speculation.go).
	Speculative bool `json:"speculative,omitempty"`
	// Claimed is when the attempt was claimed: its commit counts its
	// duration in the stage's statistics (speculation.go).
	Claimed time.Time `json:"claimed,omitzero"`
	// Watched: the task has an index entry of its own, so its commit
	// counts it in one transaction (batch.Task.Watched); an executor that
	// does not send it back commits it in two writes, as safely.
	Watched bool `json:"watched,omitempty"`
}

// RemoteClaim claims a task for a remote executor (the claim Lambda).
func (s *Lifecycle) RemoteClaim(ctx context.Context, req RemoteClaimRequest) (RemoteClaim, error) {
	body, isCopy := IsCopyMessage(req.Task)
	ref, err := batch.ParseTaskRef(body)
	if err != nil {
		return RemoteClaim{}, err
	}
	var c kernel.Claim
	if isCopy {
		c, err = s.copies.ClaimCopy(ctx, ref)
	} else {
		c, err = s.Claim(ctx, ref)
	}
	if err != nil {
		return RemoteClaim{}, err
	}
	return RemoteClaim{Task: body, Token: c.Task.Token, Attempt: c.Task.Attempt, Lease: c.Lease, Input: c.Task.Input, Speculative: isCopy, Claimed: c.Task.Claimed, Watched: c.Task.Watched}, nil
}

// RemoteCommitRequest commits a remote executor's attempt.
type RemoteCommitRequest struct {
	Claim   RemoteClaim `json:"claim"`
	Outputs int         `json:"outputs"`
	// RecordsIn and RecordsOut are optional counts for the job's status.
	RecordsIn  int64 `json:"recordsIn,omitempty"`
	RecordsOut int64 `json:"recordsOut,omitempty"`
}

// RemoteCommit commits for a remote executor (the commit Lambda). The
// token is the fence, exactly as for an in-process executor.
func (s *Lifecycle) RemoteCommit(ctx context.Context, req RemoteCommitRequest) error {
	ref, err := batch.ParseTaskRef(req.Claim.Task)
	if err != nil {
		return err
	}
	sp, err := s.CachedSpec(ctx, ref.Job)
	if err != nil {
		return fmt.Errorf("commit %s: %w", ref, err)
	}
	c := kernel.Claim{Spec: sp, Lease: req.Claim.Lease, Task: batch.Task{Ref: ref, Token: req.Claim.Token, Attempt: req.Claim.Attempt, Claimed: req.Claim.Claimed, Watched: req.Claim.Watched},
		Speculative: req.Claim.Speculative}
	return s.CommitWith(ctx, c, CommitResult{Outputs: req.Outputs, RecordsIn: req.RecordsIn, RecordsOut: req.RecordsOut})
}
