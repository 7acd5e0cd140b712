package control

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/spec"
)

// Task names are checked at submit: a stage whose task no executor can
// run would otherwise be accepted and then fail every attempt ("task
// function is not registered"). Executors publish the names they run when
// they start (PublishTaskNames, into the TaskCatalog); the Lambda
// executor's names can also be known statically (Config.StaticTaskNames,
// which the construct fills at deploy). The static names matter on AWS:
// the Lambda executor and the Fargate service (which scales from zero)
// only start once a job has queued work, so without them the first job
// could never be submitted. Stages that run a program (exec) or a Lambda
// function (lambda) name no task and are not checked.
//
// Names are never withdrawn: an executor that stops registering a task
// does not make the control plane forget it (see dynamo/tasknames.go).

// TaskCatalog stores the task names executors published (dynamo.Store).
type TaskCatalog interface {
	AddTaskNames(ctx context.Context, names []string) error
	TaskNames(ctx context.Context) ([]string, error)
}

var _ TaskCatalog = (*dynamo.Store)(nil)

// TaskNamesTTL is how long a submitter trusts the catalog it read. A name
// missing from it is read again at once, so the TTL only bounds how often
// submits of known names read the one catalog item: once per TTL per
// process, however many submit.
const TaskNamesTTL = 5 * time.Second

// MaxPublishedNames bounds one executor's publication: the catalog is one
// item (400 KB), and a registry is a handful of names.
const MaxPublishedNames = 1000

// EnvTaskNamesHint names the deploy-time list in messages
// (lambdaenv.EnvTaskNames, which imports this package).
const EnvTaskNamesHint = "BATCHWORK_TASK_NAMES"

// maxListedNames bounds the names an unknown-task error lists.
const maxListedNames = 50

// ErrNoTaskCatalog is PublishTaskNames on a service whose store keeps no
// task catalog.
var ErrNoTaskCatalog = errors.New("this control plane keeps no task catalog")

// ErrInvalidTaskNames is PublishTaskNames refusing its names (too many,
// or one no stage could name): a programming error, not worth a retry.
var ErrInvalidTaskNames = errors.New("invalid task names")

// taskNameCache is a submitter's copy of the catalog: its task names,
// and its programs (programs.go), each read and cached on its own.
type taskNameCache struct {
	nameCache
	programs nameCache
}

// nameCache is a cached copy of one of the catalog's lists.
type nameCache struct {
	mu    sync.Mutex
	names []string // sorted
	read  time.Time
}

// PublishTaskNames adds the names of the tasks an executor can run to the
// catalog submits are checked against. Executors call it when they start
// (before they take work, so a job submitted once the executor is up is
// accepted). It is idempotent and costs one read, and one write only when
// a name is new. Names no stage could hold (spec.ValidTaskName) are an
// ErrInvalidTaskNames and nothing is written.
func (s *Service) PublishTaskNames(ctx context.Context, names []string) error {
	if s.Catalog == nil {
		return ErrNoTaskCatalog
	}
	if len(names) > MaxPublishedNames {
		return fmt.Errorf("publish task names: %w: %d names, at most %d", ErrInvalidTaskNames, len(names), MaxPublishedNames)
	}
	var bad []string
	for _, n := range names {
		if !spec.ValidTaskName(n) {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("publish task names: %w: %s cannot be named by a stage's task "+
			"(a letter or digit, then letters, digits, '.', '_' and '-', at most %d characters)", ErrInvalidTaskNames, strings.Join(bad, ", "), spec.MaxNameLen)
	}
	// Read first: an executor usually restarts with names already
	// published, and a burst of starts (Lambda scaling out by hundreds of
	// cold starts) then costs reads of the one item, never a burst of
	// writes to it.
	published, _, err := s.publishedTaskNames(ctx, true)
	if err != nil {
		return fmt.Errorf("publish task names: %w", err)
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
	if err := s.Catalog.AddTaskNames(ctx, missing); err != nil {
		return err
	}
	// This process's own names count at once (the local runner submits
	// right after it published).
	s.taskNames.mu.Lock()
	s.taskNames.read = time.Time{}
	s.taskNames.mu.Unlock()
	s.log.Info("task names published", "tasks", missing)
	return nil
}

// KnownTaskNames returns the names a submit accepts, sorted: the static
// ones and the catalog's. refresh reads the catalog even if the cached
// copy is recent.
func (s *Service) KnownTaskNames(ctx context.Context, refresh bool) ([]string, error) {
	published, _, err := s.publishedTaskNames(ctx, refresh)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(s.cfg.StaticTaskNames), published...)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// publishedTaskNames returns the catalog, cached for TaskNamesTTL, and
// whether this call read it.
func (s *Service) publishedTaskNames(ctx context.Context, refresh bool) ([]string, bool, error) {
	if s.Catalog == nil {
		return nil, false, nil
	}
	return s.cachedNames(ctx, &s.taskNames.nameCache, s.Catalog.TaskNames, refresh)
}

// cachedNames returns c's list, read with read when refresh is set or the
// copy is older than TaskNamesTTL, and whether this call read it.
func (s *Service) cachedNames(ctx context.Context, c *nameCache, read func(context.Context) ([]string, error), refresh bool) ([]string, bool, error) {
	c.mu.Lock()
	names, last := c.names, c.read
	c.mu.Unlock()
	now := s.Now()
	if !refresh && !last.IsZero() && now.Sub(last) < TaskNamesTTL {
		return names, false, nil
	}
	// Read outside the lock: a slow read must not hold up submits that
	// the cached copy can answer.
	names, err := read(ctx)
	if err != nil {
		return nil, false, err
	}
	names = slices.Clone(names) // sorted for the lookups, whatever the catalog returns
	slices.Sort(names)
	c.mu.Lock()
	if !now.Before(c.read) { // never replace a newer read with an older one
		c.names, c.read = names, now
	}
	c.mu.Unlock()
	return names, true, nil
}

// checkTaskNames rejects the stages whose task is neither static nor
// published, with a *spec.ValidationError naming each stage's task field
// and listing the known names. It reads the catalog again once when the
// cached copy misses a name, so an executor that started a moment ago
// counts. Off unless Config.CheckTaskNames.
func (s *Service) checkTaskNames(ctx context.Context, sp *spec.Job) error {
	if !s.cfg.CheckTaskNames {
		return nil
	}
	var wanted []int // stages with a task the static names lack
	for i, st := range sp.Stages {
		if st.Task != "" && !slices.Contains(s.cfg.StaticTaskNames, st.Task) {
			wanted = append(wanted, i)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	published, fresh, err := s.publishedTaskNames(ctx, false)
	if err != nil {
		return fmt.Errorf("check task names: %w", err)
	}
	unknown := unknownTasks(sp, wanted, published)
	if len(unknown) > 0 && !fresh {
		if published, _, err = s.publishedTaskNames(ctx, true); err != nil {
			return fmt.Errorf("check task names: %w", err)
		}
		unknown = unknownTasks(sp, wanted, published)
	}
	if len(unknown) == 0 {
		return nil
	}
	known := append(slices.Clone(s.cfg.StaticTaskNames), published...)
	slices.Sort(known)
	known = slices.Compact(known)
	ve := &spec.ValidationError{}
	for _, i := range unknown {
		ve.Errors = append(ve.Errors, spec.FieldError{
			Field:   fmt.Sprintf("stages[%d].task", i),
			Message: unknownTaskMessage(sp.Stages[i].Task, known),
		})
	}
	return &UnknownTaskError{Spec: ve}
}

// UnknownTaskError is a spec refused because a stage names a task (or an
// exec program: programs.go) no executor runs. It unwraps to the *spec.ValidationError naming each
// such stage's task field (the API's 400), and lets a schedule's firing
// tell it from a failure worth retrying.
type UnknownTaskError struct{ Spec *spec.ValidationError }

func (e *UnknownTaskError) Error() string { return e.Spec.Error() }
func (e *UnknownTaskError) Unwrap() error { return e.Spec }

func unknownTasks(sp *spec.Job, wanted []int, published []string) []int {
	var unknown []int
	for _, i := range wanted {
		if _, ok := slices.BinarySearch(published, sp.Stages[i].Task); !ok {
			unknown = append(unknown, i)
		}
	}
	return unknown
}

func unknownTaskMessage(task string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("unknown task %q: no executor has published its task names yet "+
			"(executors publish them when they start; the operator can also list them at deploy, as %s)", task, EnvTaskNamesHint)
	}
	list := strings.Join(known[:min(len(known), maxListedNames)], ", ")
	if more := len(known) - maxListedNames; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("unknown task %q; known tasks: %s", task, list)
}

// underSpec puts a spec's field errors under the schedule document's
// "spec" field, as schedule.Validate names them.
func underSpec(err error) error {
	var ve *spec.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &spec.ValidationError{Errors: slices.Clone(ve.Errors)}
	for i := range out.Errors {
		out.Errors[i].Field = "spec." + out.Errors[i].Field
	}
	return out
}

// ParseTaskNames reads a list of task names (BATCHWORK_TASK_NAMES): names
// separated by commas or whitespace; empty is none. A name no stage could
// hold is an error naming it.
func ParseTaskNames(s string) ([]string, error) {
	var out []string
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !spec.ValidTaskName(name) {
			return nil, fmt.Errorf("task name %q must be a letter or digit, then letters, digits, '.', '_' and '-', at most %d characters", name, spec.MaxNameLen)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
