package executor

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/control"
)

// copyClaimer is a control plane that runs speculative copies
// (control.Service.ClaimCopy).
type copyClaimer interface {
	ClaimCopy(context.Context, batch.TaskRef) (control.Claim, error)
}

// claim claims the task a message names, or its speculative copy when the
// message asks for one. A control plane without copies drops copy
// messages: the task's own claim runs on.
func (r *Runner) claim(ctx context.Context, ref batch.TaskRef, isCopy bool) (control.Claim, error) {
	if !isCopy {
		return r.CP.Claim(ctx, ref)
	}
	cc, ok := r.CP.(copyClaimer)
	if !ok {
		return control.Claim{}, fmt.Errorf("claim copy %s: this control plane runs no copies: %w", ref, batch.ErrAlreadyDone)
	}
	return cc.ClaimCopy(ctx, ref)
}
