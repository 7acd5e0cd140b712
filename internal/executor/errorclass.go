package executor

import (
	"errors"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/split"
)

// classOf classifies an attempt's error as domain.ClassOf does, and an
// input object whose bytes are not valid for its format
// (split.ErrCorruptInput) as permanent: its reads are pinned, so a retry
// reads the same bytes. shared/split cannot wrap domain.ErrPermanent
// itself (shared/domain imports it), hence the mapping here.
func classOf(err error) domain.ErrorClass {
	c := domain.ClassOf(err)
	if c == domain.ClassError && errors.Is(err, split.ErrCorruptInput) {
		return domain.ClassPermanent
	}
	return c
}
