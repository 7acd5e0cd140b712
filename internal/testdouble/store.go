package testdouble

// Store is the control plane's store port in memory. It fakes the port,
// not the DynamoDB API: each method implements the contract its
// shared/dynamo counterpart documents (outcomes and sentinel errors), and
// every status change is decided by the statemachine rules (sm.Decide for
// tasks, the From lists of sm.Stages and sm.Jobs for stages and jobs), the
// same rules the adapter renders into its conditions. So the fake agrees
// with DynamoDB's conditions by construction rather than by imitation,
// and storetest holds it to the same cases as dynamo.Store.
//
// Faults are injected per call: a hook consulted before a method applies
// fails it with nothing changed; one consulted after it applied models a
// lost response (the write stands, the caller gets an error).

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// msTime keeps the millisecond precision DynamoDB records keep, so that
// comparisons of stamps (slots, leases) behave as they do on the table.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

type idemRow struct{ job, specHash string }

type jobRow struct {
	job domain.Job
	due time.Time
}

type stageKey struct {
	job string
	idx int
}

type stageRow struct {
	st      domain.Stage
	planned bool // SetStagePlan ran: a plan of zero tasks is still a plan
	due     time.Time
}

type shardKey struct {
	job          string
	stage, shard int
}

type counter struct {
	left          int
	recIn, recOut int64
	failures      int
}

type taskRow struct {
	t             domain.Task
	recIn, recOut int64
	due           time.Time
	// redriveGen is the redrive whose steps the task has had (the
	// adapter's rdg): a repeat of that redrive leaves it alone.
	redriveGen int
}

type attemptKey struct {
	ref     domain.TaskRef
	attempt int
}

// Store is an in-memory store. One mutex serialises every method, so each
// call is atomic, like the conditional write or transaction it stands
// for. It implements every port method: one it cannot model answers an
// error naming itself, and never pretends the feature is absent.
//
// Its methods are declared on one record type per entity, which Store
// embeds over the same state, so that each reads as the adapter's methods
// of that entity do.
type Store struct {
	*state
	*jobRecords
	*stageRecords
	*taskRecords
	*indexRecords
	*attemptRecords
	*scheduleRecords
}

// The per-entity record types share one state.
type (
	jobRecords      struct{ *state }
	stageRecords    struct{ *state }
	taskRecords     struct{ *state }
	indexRecords    struct{ *state }
	attemptRecords  struct{ *state }
	scheduleRecords struct{ *state }
)

type state struct {
	log *Journal

	mu            sync.Mutex
	before, after Hook
	calls         map[string]int
	idem          map[string]idemRow
	jobs          map[string]*jobRow
	stages        map[stageKey]*stageRow
	counters      map[shardKey]*counter
	tasks         map[domain.TaskRef]*taskRow
	slots         map[dynamo.SlotMap]map[domain.TaskRef]time.Time
	ends          map[attemptKey]domain.AttemptEnd
	alive         map[string]time.Time // executor id -> promised until
	mem           map[string]dynamo.ExecutorMemory
	timeline      []domain.AttemptEnd // task events of the timeline only
	taskNames     []string
	programs      []string
}

// NewStore is an empty store whose writes of interest (jobs ended, stages
// moved) go to log.
func NewStore(log *Journal) *Store {
	s := &state{
		log:      log,
		calls:    map[string]int{},
		idem:     map[string]idemRow{},
		jobs:     map[string]*jobRow{},
		stages:   map[stageKey]*stageRow{},
		counters: map[shardKey]*counter{},
		tasks:    map[domain.TaskRef]*taskRow{},
		slots:    map[dynamo.SlotMap]map[domain.TaskRef]time.Time{},
		ends:     map[attemptKey]domain.AttemptEnd{},
		alive:    map[string]time.Time{},
		mem:      map[string]dynamo.ExecutorMemory{},
	}
	return &Store{state: s, jobRecords: &jobRecords{s}, stageRecords: &stageRecords{s}, taskRecords: &taskRecords{s},
		indexRecords: &indexRecords{s}, attemptRecords: &attemptRecords{s}, scheduleRecords: &scheduleRecords{s}}
}

// SetFaults installs the hooks consulted before and after each call.
func (f *Store) SetFaults(before, after Hook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.before, f.after = before, after
}

// CallCount is how often method was called, whatever its outcome.
func (f *Store) CallCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// call runs one port call: the before hook, then fn under the mutex,
// then, if fn applied, the after hook. Hooks run outside the mutex so
// that one may call the store itself (another process acting meanwhile).
func call[T any](f *state, method string, fn func() (T, error)) (T, error) {
	var zero T
	f.mu.Lock()
	f.calls[method]++
	before, after := f.before, f.after
	f.mu.Unlock()
	if before != nil {
		if err := before(method); err != nil {
			return zero, err
		}
	}
	f.mu.Lock()
	v, err := fn()
	f.mu.Unlock()
	if err != nil {
		return v, err
	}
	if after != nil {
		if err := after(method); err != nil {
			return zero, err
		}
	}
	return v, nil
}

// do is call for methods that return only an error.
func do(f *state, method string, fn func() error) error {
	_, err := call(f, method, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// errUnsupported is a port method the store does not model: a test that
// reaches one fails on it rather than running on as if the feature were
// absent.
func errUnsupported(method string) error {
	return fmt.Errorf("testdouble.Store: %s not supported", method)
}

// ---- for tests: reads and losses no port call makes ----

// JobItems counts the job items and idempotency records the store holds,
// so a test can check that a refused submission wrote nothing.
func (f *Store) JobItems() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.jobs) + len(f.idem)
}

// LoseJob removes a job's item and its stage idx, as a deletion that
// passed a later write by leaves things.
func (f *Store) LoseJob(job string, idx int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.jobs, job)
	delete(f.stages, stageKey{job, idx})
}

// LoseTask removes a task's record.
func (f *Store) LoseTask(ref domain.TaskRef) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.tasks, ref)
}

// DueOf reads a record's place in the index (zero: not in it), for tests.
func (f *Store) DueOf(it dynamo.DueItem) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch it.Kind {
	case dynamo.DueJob:
		if j, ok := f.jobs[it.Job]; ok {
			return j.due
		}
	case dynamo.DueStage:
		if s, ok := f.stages[stageKey{it.Job, it.Stage}]; ok {
			return s.due
		}
	default:
		if t, ok := f.tasks[it.Task]; ok {
			return t.due
		}
	}
	return time.Time{}
}

// AttemptEnd reads the recorded end of one attempt, for tests.
func (f *Store) AttemptEnd(ref domain.TaskRef, attempt int) (domain.AttemptEnd, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.ends[attemptKey{ref, attempt}]
	return e, ok
}

// JobRecords counts the records the store holds of a job.
func (f *Store) JobRecords(job string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	if _, ok := f.jobs[job]; ok {
		n++
	}
	for _, v := range f.idem {
		if v.job == job {
			n++
		}
	}
	for k := range f.stages {
		if k.job == job {
			n++
		}
	}
	for k := range f.counters {
		if k.job == job {
			n++
		}
	}
	for k := range f.tasks {
		if k.Job == job {
			n++
		}
	}
	for k := range f.ends {
		if k.ref.Job == job {
			n++
		}
	}
	return n
}

// CheckInvariants fails t if the records disagree with each other in a
// way no sequence of correct steps allows. Tests run it at their end, so
// every scenario also checks these.
func (f *Store) CheckInvariants(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	succeeded, tolerated := map[stageKey]int{}, map[stageKey]int{}
	for ref, ft := range f.tasks {
		task := ft.t
		k := stageKey{ref.Job, ref.Stage}
		if s, ok := f.stages[k]; !ok || !s.planned || ref.Partition >= s.st.Total {
			t.Errorf("invariant: task %s exists outside its stage's plan", ref)
		}
		if task.Attempt > task.MaxAttempts {
			t.Errorf("invariant: task %s ran attempt %d of %d", ref, task.Attempt, task.MaxAttempts)
		}
		if task.State == sm.TaskFailed && task.Tolerated {
			tolerated[k]++ // counted finished by its stage (toleratedFailures)
		}
		if task.State == sm.TaskSucceeded {
			succeeded[k]++
			if task.CommittedAttempt < 1 || task.CommittedAttempt > task.Attempt {
				t.Errorf("invariant: task %s committed attempt %d of %d", ref, task.CommittedAttempt, task.Attempt)
			}
		}
	}
	for k, s := range f.stages {
		// Counters exist before the first task, so once they all do, the
		// tasks they count down and the tasks that succeeded agree.
		if s.planned {
			left, missing := 0, 0
			for sh := 0; sh < s.st.Shards; sh++ {
				if c, ok := f.counters[shardKey{k.job, k.idx, sh}]; ok {
					left += c.left
				} else {
					missing++
				}
			}
			if missing == 0 && left != s.st.Total-succeeded[k]-tolerated[k] {
				t.Errorf("invariant: stage %s/%d counts %d tasks left, but %d of %d succeeded and %d failed tolerated",
					k.job, k.idx, left, succeeded[k], s.st.Total, tolerated[k])
			}
		}
		if s.st.Tolerated != tolerated[k] {
			t.Errorf("invariant: stage %s/%d counts %d tolerated failures, its tasks %d", k.job, k.idx, s.st.Tolerated, tolerated[k])
		}
		if s.st.State == sm.StageCompleted && (!s.st.Materialized || succeeded[k]+tolerated[k] != s.st.Total) {
			t.Errorf("invariant: stage %s/%d COMPLETED with %d of %d tasks succeeded and %d failed tolerated (materialized %v)",
				k.job, k.idx, succeeded[k], s.st.Total, tolerated[k], s.st.Materialized)
		}
	}
	for id, j := range f.jobs {
		if j.job.State != sm.JobSucceeded {
			continue
		}
		if j.job.Manifest == "" {
			t.Errorf("invariant: job %s SUCCEEDED without a manifest", id)
		}
		for k, s := range f.stages {
			if k.job == id && s.st.State != sm.StageCompleted {
				t.Errorf("invariant: job %s SUCCEEDED with stage %d %s", id, k.idx, s.st.State)
			}
		}
	}
}
