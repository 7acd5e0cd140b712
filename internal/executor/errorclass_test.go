package executor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// An input object's corrupt bytes fail the task at once; the other
// classes keep their precedence over it.
func TestClassOfCorruptInput(t *testing.T) {
	corrupt := fmt.Errorf("prepare input: %w", split.ErrCorruptInput)
	for _, tc := range []struct {
		err  error
		want domain.ErrorClass
	}{
		{corrupt, domain.ClassPermanent},
		{errors.New("connection reset"), domain.ClassError},
		{errors.Join(corrupt, domain.ErrInputChanged), domain.ClassInputChanged},
		{errors.Join(corrupt, domain.ErrOutOfMemory), domain.ClassOutOfMemory},
	} {
		if got := classOf(tc.err); got != tc.want {
			t.Errorf("classOf(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
