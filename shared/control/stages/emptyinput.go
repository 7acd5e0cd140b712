package stages

import (
	"fmt"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/spec"
	"github.com/batchwork/batchwork/shared/split"
)

// checkInputNotEmpty refuses, as domain.ErrBadInput, a listing that found
// no object to read for a stage that did not opt in to empty input
// (spec.Input.AllowEmpty). An empty prefix is most often a mistyped path,
// and a job that read nothing would otherwise end SUCCEEDED, empty; the
// error names the prefix as resolved, so the user sees where it looked.
// field is the stage's "stages[i].partitions.input".
func checkInputNotEmpty(field string, in *spec.Input, objs []split.Object) error {
	if len(objs) > 0 || in.AllowEmpty {
		return nil
	}
	return fmt.Errorf("%w: %s.prefix: %s matches no object; check the path, or set %s.allowEmpty: true if the stage may read nothing",
		domain.ErrBadInput, field, in.Prefix, field)
}
