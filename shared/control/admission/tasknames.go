package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// catalogList is one of the catalog's lists (task names, exec programs):
// how its names are checked, read, added and reported. Both are published
// by executors when they start, cached by submitters for TaskNamesTTL and
// read again once on a miss, and checked against a spec's stages.
type catalogList struct {
	what  string // "task names", "programs": in errors and logs
	noun  string // "task", "program": in an unknown name's message
	valid func(string) bool
	rule  string // why a name is not valid
	cache *nameCache
	// read and add reach the catalog; nil when there is none (only the
	// static names are known, and nothing can be published).
	read   func(context.Context) ([]string, error)
	add    func(context.Context, []string) error
	static []string
	// stageName is what a stage names in this list ("" for none), and
	// field its field (a format of the stage's index).
	stageName func(spec.Stage) string
	field     string
	// none is the message of an unknown name when nothing is known.
	none string
}

// taskList is the catalog's task names (static ones only without a
// catalog).
func (s *Admitter) taskList() *catalogList {
	l := &catalogList{
		what: "task names", noun: "task", valid: spec.ValidTaskName,
		rule:  fmt.Sprintf("cannot be named by a stage's task (a letter or digit, then letters, digits, '.', '_' and '-', at most %d characters)", spec.MaxNameLen),
		cache: &s.names.nameCache, static: s.cfg.StaticTaskNames,
		stageName: func(st spec.Stage) string { return st.Task }, field: "stages[%d].task",
		none: "no executor has published its task names yet " +
			"(executors publish them when they start; the operator can also list them at deploy, as " + EnvTaskNamesHint + ")",
	}
	if c := s.catalog(); c != nil {
		l.read, l.add = c.CatalogTaskNames, c.CatalogAddTaskNames
	}
	return l
}

// publishNames adds names to l, reading first: an executor usually restarts
// with names already published, and a burst of starts (Lambda scaling out
// by hundreds of cold starts) then costs reads of the one item, never a
// burst of writes to it. Names l cannot hold are an ErrInvalidTaskNames
// and nothing is written; no catalog is ErrNoTaskCatalog.
func (s *Admitter) publishNames(ctx context.Context, l *catalogList, names []string) error {
	if l == nil || l.add == nil {
		return ErrNoTaskCatalog
	}
	if len(names) > MaxPublishedNames {
		return fmt.Errorf("publish %s: %w: %d names, at most %d", l.what, ErrInvalidTaskNames, len(names), MaxPublishedNames)
	}
	var bad []string
	for _, n := range names {
		if !l.valid(n) {
			bad = append(bad, fmt.Sprintf("%q", n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("publish %s: %w: %s %s", l.what, ErrInvalidTaskNames, strings.Join(bad, ", "), l.rule)
	}
	published, _, err := s.cachedNames(ctx, l.cache, l.read, true)
	if err != nil {
		return fmt.Errorf("publish %s: %w", l.what, err)
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
	if err := l.add(ctx, missing); err != nil {
		return err
	}
	// This process's own names count at once (the local runner submits
	// right after it published).
	l.cache.mu.Lock()
	l.cache.read = time.Time{}
	l.cache.mu.Unlock()
	s.log.Info(l.what+" published", "names", missing)
	return nil
}

// PublishTaskNames adds the names of the tasks an executor can run to the
// catalog submits are checked against. Executors call it when they start
// (before they take work, so a job submitted once the executor is up is
// accepted). It is idempotent and costs one read, and one write only when
// a name is new. Names no stage could hold (spec.ValidTaskName) are an
// ErrInvalidTaskNames and nothing is written.
func (s *Admitter) PublishTaskNames(ctx context.Context, names []string) error {
	return s.publishNames(ctx, s.taskList(), names)
}

// KnownTaskNames returns the names a submit accepts, sorted: the static
// ones and the catalog's. refresh reads the catalog even if the cached
// copy is recent.
func (s *Admitter) KnownTaskNames(ctx context.Context, refresh bool) ([]string, error) {
	l := s.taskList()
	published, _, err := s.cachedNames(ctx, l.cache, l.read, refresh)
	if err != nil {
		return nil, err
	}
	all := append(slices.Clone(s.cfg.StaticTaskNames), published...)
	slices.Sort(all)
	return slices.Compact(all), nil
}

// cachedNames returns c's list, read with read when refresh is set or the
// copy is older than TaskNamesTTL, and whether this call read it. A nil
// read (no catalog) has nothing.
func (s *Admitter) cachedNames(ctx context.Context, c *nameCache, read func(context.Context) ([]string, error), refresh bool) ([]string, bool, error) {
	if read == nil {
		return nil, false, nil
	}
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

// check rejects the stages whose name in l is neither static nor
// published, with an *UnknownTaskError naming each stage's field and
// listing the known names. It reads the catalog again once when the
// cached copy misses a name, so an executor that started a moment ago
// counts. Off unless Config.CheckTaskNames, and without a list.
func (s *Admitter) check(ctx context.Context, l *catalogList, sp *spec.Job) error {
	if !s.cfg.CheckTaskNames || l == nil {
		return nil
	}
	var wanted []int // stages naming what the static list lacks
	for i, st := range sp.Stages {
		if n := l.stageName(st); n != "" && !slices.Contains(l.static, n) {
			wanted = append(wanted, i)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	unknown := func(published []string) []int {
		var out []int
		for _, i := range wanted {
			if _, ok := slices.BinarySearch(published, l.stageName(sp.Stages[i])); !ok {
				out = append(out, i)
			}
		}
		return out
	}
	published, fresh, err := s.cachedNames(ctx, l.cache, l.read, false)
	if err != nil {
		return fmt.Errorf("check %s: %w", l.what, err)
	}
	missing := unknown(published)
	if len(missing) > 0 && !fresh {
		if published, _, err = s.cachedNames(ctx, l.cache, l.read, true); err != nil {
			return fmt.Errorf("check %s: %w", l.what, err)
		}
		missing = unknown(published)
	}
	if len(missing) == 0 {
		return nil
	}
	known := append(slices.Clone(l.static), published...)
	slices.Sort(known)
	known = slices.Compact(known)
	ve := &spec.ValidationError{}
	for _, i := range missing {
		ve.Errors = append(ve.Errors, spec.FieldError{
			Field:   fmt.Sprintf(l.field, i),
			Message: l.unknownMessage(l.stageName(sp.Stages[i]), known),
		})
	}
	return &UnknownTaskError{Spec: ve}
}

// CheckTaskNames is check on the task names: stages that run a program or
// a Lambda function name no task and are not checked.
func (s *Admitter) CheckTaskNames(ctx context.Context, sp *spec.Job) error {
	return s.check(ctx, s.taskList(), sp)
}

// unknownMessage says name is not in l, listing the known names.
func (l *catalogList) unknownMessage(name string, known []string) string {
	if len(known) == 0 {
		return fmt.Sprintf("unknown %s %q: %s", l.noun, name, l.none)
	}
	list := strings.Join(known[:min(len(known), maxListedNames)], ", ")
	if more := len(known) - maxListedNames; more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("unknown %s %q; known %ss: %s", l.noun, name, l.noun, list)
}

// UnknownTaskError is a spec refused because a stage names a task (or an
// exec program: programs.go) no executor runs. It unwraps to the *spec.ValidationError naming each
// such stage's task field (the API's 400), and lets a schedule's firing
// tell it from a failure worth retrying.
type UnknownTaskError struct{ Spec *spec.ValidationError }

func (e *UnknownTaskError) Error() string { return e.Spec.Error() }
func (e *UnknownTaskError) Unwrap() error { return e.Spec }

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
	return parseNames(s, spec.ValidTaskName, func(name string) error {
		return fmt.Errorf("task name %q must be a letter or digit, then letters, digits, '.', '_' and '-', at most %d characters", name, spec.MaxNameLen)
	})
}

// parseNames splits a list of names at commas and whitespace, dropping
// repeats; the first name valid refuses is bad's error.
func parseNames(s string, valid func(string) bool, bad func(name string) error) ([]string, error) {
	var out []string
	for _, name := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if !valid(name) {
			return nil, bad(name)
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out, nil
}
