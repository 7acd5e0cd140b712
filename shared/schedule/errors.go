package schedule

import (
	"errors"
	"fmt"

	"github.com/batchwork/batchwork/shared/spec"
)

// ErrPaused: the schedule is paused and has nothing to plan. The sweep
// skips it; resuming must also move the cursor (see PlanParams.LastFired)
// so the paused stretch is not caught up as downtime.
var ErrPaused = errors.New("schedule is paused")

// errorList accumulates field errors in the same shape as shared/spec, so
// the API reports schedule and spec problems alike.
type errorList []spec.FieldError

func (l *errorList) add(field, msg string) {
	*l = append(*l, spec.FieldError{Field: field, Message: msg})
}

// maxErrors caps the errors reported for one schedule, as spec does: a
// large document of junk must not produce an even larger error response.
const maxErrors = 100

// err returns the list as a *spec.ValidationError, or nil when empty.
func (l errorList) err() error {
	if len(l) == 0 {
		return nil
	}
	if len(l) > maxErrors {
		more := len(l) - maxErrors
		l = append(l[:maxErrors:maxErrors], spec.FieldError{Message: fmt.Sprintf("and %d more errors", more)})
	}
	return &spec.ValidationError{Errors: l}
}
