package admission

import (
	"context"
	"strings"

	"github.com/batchwork/batchwork/shared/spec"
)

// CheckScheduleSpec runs a submission's checks on a schedule's parsed
// spec at the schedule's creation (priority, task names, programs,
// executor sizes, functions, inputs, no output folder), so that a
// schedule whose every firing would be refused is refused itself. Errors
// name their field under the schedule document's "spec".
func (s *Admitter) CheckScheduleSpec(ctx context.Context, owner string, sp *spec.Job) error {
	if err := s.checkPriority(owner, sp); err != nil {
		return err
	}
	if err := s.CheckTaskNames(ctx, sp); err != nil {
		return underSpec(err)
	}
	if err := s.CheckPrograms(ctx, sp); err != nil {
		return underSpec(err)
	}
	if err := s.checkExecutorSizes(sp); err != nil { // memory.go
		return underSpec(err)
	}
	if err := s.checkTaskFunctions(sp); err != nil {
		err.Field = "spec." + err.Field // the spec is the body's "spec"
		return err
	}
	// The stored spec keeps its inputs:<path> prefixes: each firing
	// resolves them for the schedule's owner, as a submission does.
	if err := s.resolveInputs(ctx, owner, sp); err != nil {
		return err
	}
	// Every firing would publish to the one folder, and all but the
	// first would fail on the first's claim (stages/publish.go), unless
	// the folder names the firing's slot, which no two firings share.
	if sp.Output != "" && !strings.Contains(sp.Output, "${params."+spec.ParamScheduledTime+"}") {
		return &spec.FieldError{Field: "spec.output", Message: "a schedule's jobs cannot publish to one output folder: each firing needs its own; name it with ${params.scheduledTime}"}
	}
	return nil
}
