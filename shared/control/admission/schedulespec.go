package admission

import (
	"context"

	"github.com/batchwork/batchwork/shared/spec"
)

// CheckScheduleSpec runs a submission's checks on a schedule's parsed
// spec at the schedule's creation (priority, task names, programs,
// executor sizes, functions, inputs), so that a schedule whose every
// firing would be refused is refused itself. Errors name their field
// under the schedule document's "spec". A folder every firing would
// publish to alike is refused by the schedule's own validation
// (schedule.Parse).
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
	return s.resolveInputs(ctx, owner, sp)
}
