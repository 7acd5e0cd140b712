package control

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
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

// ProgramCatalog stores the exec programs executors published, beside
// the task names (dynamo.Store: the same item). A TaskCatalog without it
// keeps no programs, and exec stages are then not checked.
type ProgramCatalog interface {
	AddPrograms(ctx context.Context, names []string) error
	Programs(ctx context.Context) ([]string, error)
}

var _ ProgramCatalog = (*dynamo.Store)(nil)

// EnvExecProgramsHint names the deploy-time list in messages
// (lambdaenv.EnvExecPrograms, which imports this package).
const EnvExecProgramsHint = "BATCHWORK_EXEC_PROGRAMS"

// ParsePrograms reads a list of exec programs (BATCHWORK_EXEC_PROGRAMS):
// names separated by commas or whitespace; empty is none. A name no exec
// stage could hold is an error naming it.
func ParsePrograms(s string) ([]string, error) {
	var out []string
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !spec.ValidProgramName(name) {
			return nil, fmt.Errorf("program %q must be a bare name: letters, digits, '.', '_', '+' and '-', at most %d characters", name, spec.MaxNameLen)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}

func (s *Service) programCatalog() ProgramCatalog {
	pc, _ := s.Catalog.(ProgramCatalog)
	return pc
}

// PublishPrograms adds the programs an executor can run (the names in its
// programs directory) to the catalog exec stages are checked against.
// Executors call it when they start, with their task names. It is
// idempotent and costs one read, and one write only when a name is new.
// A name no exec stage could hold (spec.ValidProgramName) is an
// ErrInvalidTaskNames and nothing is written; a store without a program
// catalog is ErrNoTaskCatalog.
func (s *Service) PublishPrograms(ctx context.Context, names []string) error {
	pc := s.programCatalog()
	if pc == nil {
		return ErrNoTaskCatalog
	}
	if len(names) > MaxPublishedNames {
		return fmt.Errorf("publish programs: %w: %d names, at most %d", ErrInvalidTaskNames, len(names), MaxPublishedNames)
	}
	var bad []string
	for _, n := range names {
		if !spec.ValidProgramName(n) {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("publish programs: %w: %s cannot be named by an exec stage "+
			"(letters, digits, '.', '_', '+' and '-', at most %d characters)", ErrInvalidTaskNames, strings.Join(bad, ", "), spec.MaxNameLen)
	}
	published, _, err := s.cachedNames(ctx, &s.taskNames.programs, pc.Programs, true)
	if err != nil {
		return fmt.Errorf("publish programs: %w", err)
	}
	var missing []string
	for _, n := range names {
		if _, ok := slices.BinarySearch(published, n); !ok {
			missing = append(missing, n)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := pc.AddPrograms(ctx, missing); err != nil {
		return err
	}
	c := &s.taskNames.programs
	c.mu.Lock()
	c.read = time.Time{} // this process's own count at once
	c.mu.Unlock()
	s.log.Info("programs published", "programs", missing)
	return nil
}

// checkPrograms rejects the exec stages whose program is neither static
// (Config.StaticPrograms) nor published by an executor, with an
// *UnknownTaskError whose *spec.ValidationError names each stage's
// exec[0] and lists the known programs. Off unless Config.CheckTaskNames,
// and when the store keeps no program catalog.
func (s *Service) checkPrograms(ctx context.Context, sp *spec.Job) error {
	pc := s.programCatalog()
	if !s.cfg.CheckTaskNames || pc == nil {
		return nil
	}
	var wanted []int // exec stages whose program the static list lacks
	for i, st := range sp.Stages {
		if len(st.Exec) > 0 && !slices.Contains(s.cfg.StaticPrograms, st.Exec[0]) {
			wanted = append(wanted, i)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	unknown := func(published []string) []int {
		var out []int
		for _, i := range wanted {
			if _, ok := slices.BinarySearch(published, sp.Stages[i].Exec[0]); !ok {
				out = append(out, i)
			}
		}
		return out
	}
	published, fresh, err := s.cachedNames(ctx, &s.taskNames.programs, pc.Programs, false)
	if err != nil {
		return fmt.Errorf("check programs: %w", err)
	}
	missing := unknown(published)
	if len(missing) > 0 && !fresh {
		if published, _, err = s.cachedNames(ctx, &s.taskNames.programs, pc.Programs, true); err != nil {
			return fmt.Errorf("check programs: %w", err)
		}
		missing = unknown(published)
	}
	if len(missing) == 0 {
		return nil
	}
	known := append(slices.Clone(s.cfg.StaticPrograms), published...)
	slices.Sort(known)
	known = slices.Compact(known)
	ve := &spec.ValidationError{}
	for _, i := range missing {
		ve.Errors = append(ve.Errors, spec.FieldError{
			Field:   fmt.Sprintf("stages[%d].exec[0]", i),
			Message: unknownProgramMessage(sp.Stages[i].Exec[0], known),
		})
	}
	return &UnknownTaskError{Spec: ve}
}

func unknownProgramMessage(name string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("unknown program %q: no executor here runs programs (exec stages run on the Fargate or local executor, "+
			"from its programs directory, BATCHWORK_EXEC_DIR, and none has published any; the operator can also list them at deploy, as %s)",
			name, EnvExecProgramsHint)
	}
	list := strings.Join(known[:min(len(known), maxListedNames)], ", ")
	if more := len(known) - maxListedNames; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("unknown program %q; known programs: %s", name, list)
}
