package batchwork_test

import (
	"context"
	"errors"
	"io/fs"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/domain"
)

func TestPermanent(t *testing.T) {
	t.Parallel()
	if batchwork.Permanent(nil) != nil {
		t.Fatal("Permanent(nil) is not nil")
	}
	base := &fs.PathError{Op: "open", Path: "in.csv", Err: fs.ErrNotExist}
	err := batchwork.Permanent(base)
	if err.Error() != base.Error() {
		t.Errorf("message %q, want the wrapped error's %q", err, base)
	}
	var pe *fs.PathError
	if !errors.Is(err, batchwork.ErrPermanent) || !batchwork.IsPermanent(err) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) {
		t.Errorf("%v: the chain lost ErrPermanent or what it wraps", err)
	}
	if domain.ClassOf(err) != domain.ClassPermanent || domain.ClassOf(base) != domain.ClassError {
		t.Errorf("classes %q, %q; want permanent, error", domain.ClassOf(err), domain.ClassOf(base))
	}
	if again := batchwork.Permanent(err); again != err {
		t.Errorf("Permanent of a permanent error wrapped it again: %v", again)
	}
	// Under RunTask, as on an executor, the function's error comes back
	// as returned.
	_, got := batchwork.RunTask(context.Background(), func(ctx context.Context, tk *batchwork.Task) error {
		return batchwork.Permanent(errors.New("bad record"))
	}, batchwork.TaskInput{})
	if !batchwork.IsPermanent(got) {
		t.Errorf("RunTask returned %v, want the permanent error", got)
	}
}
