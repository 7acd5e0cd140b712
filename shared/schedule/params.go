package schedule

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// FiringParams are the run parameters a firing for scheduled time at
// submits with: the schedule's own, and the slot it stands for (not the
// time it fired: a catch-up run's is the earliest missed time it covers)
// as spec.ParamScheduledTime and spec.ParamScheduledDate, in UTC.
func (s *Schedule) FiringParams(at time.Time) map[string]string {
	out := make(map[string]string, len(s.Params)+2)
	maps.Copy(out, s.Params)
	at = at.UTC()
	out[spec.ParamScheduledTime] = at.Format(time.RFC3339)
	out[spec.ParamScheduledDate] = at.Format(time.DateOnly)
	return out
}

// checkParams checks a schedule's params against its spec at creation,
// by resolving the spec as a firing would: an undeclared or reserved
// name, a required parameter left unset and a bad placeholder are errors
// now, not a skipped run at every firing.
func checkParams(errs *errorList, s *Schedule, job *spec.Job) {
	for _, k := range slices.Sorted(maps.Keys(s.Params)) {
		if spec.Reserved(k) {
			errs.add("params."+k, "is set by each firing to its scheduled time; a schedule cannot set it")
		}
	}
	if job == nil || len(*errs) > 0 {
		return
	}
	first, err := job.Resolve(s.FiringParams(time.Unix(0, 0)))
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		if err != nil {
			errs.add("params", err.Error())
			return
		}
		checkOutputPerSlot(errs, s, job, first)
		return
	}
	for _, fe := range ve.Errors {
		switch {
		case fe.Field == "param": // a schedule's params, not a submission's
			fe.Field = "params"
		case fe.Field != "":
			fe.Field = "spec." + fe.Field
		default:
			fe.Field = "spec"
		}
		*errs = append(*errs, fe)
	}
}

// checkOutputPerSlot refuses a spec whose output folder two firings would
// share: all but the first would fail on the first's claim of it
// (stages/publish.go). first is job resolved for the slot at the epoch;
// the folder is resolved again for a slot a second later, the closest
// two slots can be, and the two must differ. Comparing the resolved
// folders, not their text, refuses an escaped $${params.scheduledTime}, a
// folder named by ${params.scheduledDate} alone, and any other value two
// slots share.
func checkOutputPerSlot(errs *errorList, s *Schedule, job, first *spec.Job) {
	if first.Output == "" {
		return
	}
	second, err := job.Resolve(s.FiringParams(time.Unix(1, 0)))
	if err != nil || second.Output != first.Output {
		return // resolving differs only in the slot: first's checks hold
	}
	errs.add("spec.output", fmt.Sprintf("a schedule's jobs cannot publish to one output folder (every firing resolves it to %q): each firing needs its own; name it with ${params.scheduledTime}", first.Output))
}
