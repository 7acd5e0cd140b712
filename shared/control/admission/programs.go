package admission

import (
	"context"
	"fmt"

	"github.com/batchwork/batchwork/shared/spec"
)

// Exec programs are checked at submit as task names are (tasknames.go):
// an exec stage whose program no executor has would otherwise be accepted
// and then wait, handed back by every executor (none claims a task it
// cannot run: executor.Runner.cannotRun), or on an older executor fail
// every attempt. Executors that run programs (Fargate, local, with a
// programs directory) publish the programs they find there when they
// start (PublishPrograms), into the same catalog item as their task
// names; the Lambda executor runs none and publishes none, so a stack
// without such an executor refuses exec stages at submit. The check is on
// with the task-name check (Config.CheckTaskNames), and reads the catalog
// the same way: cached for TaskNamesTTL, read again once on a miss. As
// for task names, a program once published stays known, and the programs
// of the deployed Fargate image can be known statically
// (Config.StaticPrograms): the Fargate service scales from zero, so it
// publishes only once work is queued for it.

// EnvExecProgramsHint names the deploy-time list in messages
// (lambdaenv.EnvExecPrograms, which imports this package).
const EnvExecProgramsHint = "BATCHWORK_EXEC_PROGRAMS"

// ParsePrograms reads a list of exec programs (BATCHWORK_EXEC_PROGRAMS):
// names separated by commas or whitespace; empty is none. A name no exec
// stage could hold is an error naming it.
func ParsePrograms(s string) ([]string, error) {
	return parseNames(s, spec.ValidProgramName, func(name string) error {
		return fmt.Errorf("program %q must be a bare name: letters, digits, '.', '_', '+' and '-', at most %d characters", name, spec.MaxNameLen)
	})
}

// programList is the catalog's exec programs; nil when the service has
// no catalog (exec stages are then not checked).
func (s *Admitter) programList() *catalogList {
	pc := s.catalog()
	if pc == nil {
		return nil
	}
	return &catalogList{
		what: "programs", noun: "program", valid: spec.ValidProgramName,
		rule:  fmt.Sprintf("cannot be named by an exec stage (letters, digits, '.', '_', '+' and '-', at most %d characters)", spec.MaxNameLen),
		cache: &s.names.programs, read: pc.CatalogPrograms, add: pc.CatalogAddPrograms, static: s.cfg.StaticPrograms,
		stageName: func(st spec.Stage) string {
			if len(st.Exec) == 0 {
				return ""
			}
			return st.Exec[0]
		},
		field: "stages[%d].exec[0]",
		none: "no executor here runs programs (exec stages run on the Fargate or local executor, " +
			"from its programs directory, BATCHWORK_EXEC_DIR, and none has published any; the operator can also list them at deploy, as " +
			EnvExecProgramsHint + ")",
	}
}

// PublishPrograms adds the programs an executor can run (the names in its
// programs directory) to the catalog exec stages are checked against.
// Executors call it when they start, with their task names. It is
// idempotent and costs one read, and one write only when a name is new.
// A name no exec stage could hold (spec.ValidProgramName) is an
// ErrInvalidTaskNames and nothing is written; a service without a
// catalog answers ErrNoTaskCatalog.
func (s *Admitter) PublishPrograms(ctx context.Context, names []string) error {
	return s.publishNames(ctx, s.programList(), names)
}

// CheckPrograms rejects the exec stages whose program is neither static
// (Config.StaticPrograms) nor published by an executor, with an
// *UnknownTaskError whose *spec.ValidationError names each stage's
// exec[0] and lists the known programs. Off unless Config.CheckTaskNames,
// and when the service has no catalog.
func (s *Admitter) CheckPrograms(ctx context.Context, sp *spec.Job) error {
	return s.check(ctx, s.programList(), sp)
}
