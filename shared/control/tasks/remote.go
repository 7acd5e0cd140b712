package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/control/kernel"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
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
	// body ends in domain.CopyMarker; speculation.go).
	Speculative bool `json:"speculative,omitempty"`
	// Claimed is when the attempt was claimed: its commit counts its
	// duration in the stage's statistics (speculation.go).
	Claimed time.Time `json:"claimed,omitzero"`
	// Watched: the task has an index entry of its own, so its commit
	// counts it in one transaction (domain.Task.Watched); an executor that
	// does not send it back commits it in two writes, as safely.
	Watched bool `json:"watched,omitempty"`
	// Combine: kernel.Claim.Combine.
	Combine []domain.Output `json:"combine,omitempty"`
}

// RemoteClaim claims a task for a remote executor (the claim Lambda).
func (s *Lifecycle) RemoteClaim(ctx context.Context, req RemoteClaimRequest) (RemoteClaim, error) {
	body, isCopy := IsCopyMessage(req.Task)
	ref, err := domain.ParseTaskRef(body)
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
	return RemoteClaim{Task: body, Token: c.Task.Token, Attempt: c.Task.Attempt, Lease: c.Lease, Input: c.Task.Input, Speculative: isCopy, Claimed: c.Task.Claimed, Watched: c.Task.Watched, Combine: c.Combine}, nil
}

// RemoteCommitRequest commits a remote executor's attempt.
type RemoteCommitRequest struct {
	Claim   RemoteClaim `json:"claim"`
	Outputs int         `json:"outputs"`
	// RecordsIn and RecordsOut are optional counts for the job's status.
	RecordsIn  int64 `json:"recordsIn,omitempty"`
	RecordsOut int64 `json:"recordsOut,omitempty"`
}

// CommitArgs is what the commit route commits for a remote executor
// (the commit function): its claim, from the wire, and its result, which
// never says WrittenHere, so its outputs are checked against S3. specOf
// is the job's spec (kernel.Kernel.CachedSpec). The token is the fence,
// exactly as for an in-process executor.
func (r RemoteCommitRequest) CommitArgs(ctx context.Context, specOf func(context.Context, string) (*spec.Job, error)) (kernel.Claim, CommitResult, error) {
	ref, err := domain.ParseTaskRef(r.Claim.Task)
	if err != nil {
		return kernel.Claim{}, CommitResult{}, err
	}
	sp, err := specOf(ctx, ref.Job)
	if err != nil {
		return kernel.Claim{}, CommitResult{}, fmt.Errorf("commit %s: %w", ref, err)
	}
	c := kernel.Claim{Spec: sp, Lease: r.Claim.Lease, Task: domain.Task{Ref: ref, Token: r.Claim.Token, Attempt: r.Claim.Attempt, Claimed: r.Claim.Claimed, Watched: r.Claim.Watched},
		Speculative: r.Claim.Speculative}
	return c, CommitResult{Outputs: r.Outputs, RecordsIn: r.RecordsIn, RecordsOut: r.RecordsOut}, nil
}
