package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/control"
	"github.com/batchwork/batchwork/shared/domain"
)

// claim claims the task a message names, or its speculative copy when the
// message asks for one. A control plane without copies drops copy
// messages: the task's own claim runs on.
func (r *Runner) claim(ctx context.Context, ref domain.TaskRef, isCopy bool) (control.Claim, error) {
	if !isCopy {
		return r.CP.Claim(ctx, ref)
	}
	c, err := r.CP.ClaimCopy(ctx, ref)
	if errors.Is(err, ErrUnsupported) {
		return control.Claim{}, fmt.Errorf("claim copy %s: this control plane runs no copies (%w): %w", ref, err, domain.ErrAlreadyDone)
	}
	return c, err
}
