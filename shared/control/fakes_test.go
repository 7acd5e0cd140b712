package control

// In-memory fakes of the control plane's ports (Store, Queue, Blob) for
// fast unit tests. They are fakes of the ports, not of the DynamoDB API:
// each method implements the contract its shared/dynamo counterpart
// documents (outcomes and sentinel errors), and every status change is
// decided by the statemachine rules (sm.Decide for tasks, the From lists
// of sm.Stages and sm.Jobs for stages and jobs), the same rules the
// adapter renders into its conditions. So the fake agrees with DynamoDB's
// conditions by construction rather than by imitation.
//
// Faults are injected per call: a hook consulted before a method applies
// fails it with nothing changed; one consulted after it applied models a
// lost response (the write stands, the caller gets an error).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/blob"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/queue"
	"github.com/batchwork/batchwork/shared/split"
	sm "github.com/batchwork/batchwork/statemachine"
)

var (
	_ Store = (*fakeStore)(nil)
	_ Queue = (*fakeQueue)(nil)
	_ Blob  = (*fakeBlob)(nil)
)

// ---- faults and ordering ----------------------------------------------------

// faultHook decides the outcome of one port call by its method name: nil
// lets it through.
type faultHook func(method string) error

// errInjected is the error the tests' hooks return.
var errInjected = errors.New("injected fault")

// failOnce returns a hook that fails the first call of method with
// errInjected and lets every other call through, so a test can fail one
// step and watch the repair.
func failOnce(method string) faultHook { return failOnceWith(method, errInjected) }

// failOnceWith is failOnce with a given error, such as
// dynamo.ErrContention (a transaction that nothing of was applied).
func failOnceWith(method string, err error) faultHook {
	var done atomic.Bool
	return func(m string) error {
		if m == method && done.CompareAndSwap(false, true) {
			return fmt.Errorf("%s: %w", m, err)
		}
		return nil
	}
}

// journal records writes of interest across the fakes in the order they
// applied, so a test can check one came before another (a manifest
// before the stage's completion).
type journal struct {
	mu      sync.Mutex
	entries []string
}

func (j *journal) add(format string, args ...any) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, fmt.Sprintf(format, args...))
}

func (j *journal) all() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// index is the position of entry's first occurrence, or -1.
func (j *journal) index(entry string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Index(j.entries, entry)
}

func (j *journal) count(entry string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for _, e := range j.entries {
		if e == entry {
			n++
		}
	}
	return n
}

// msTime keeps the millisecond precision DynamoDB records keep, so that
// comparisons of stamps (slots, leases) behave as they do on the table.
func msTime(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// ---- store --------------------------------------------------------------------

type fakeIdem struct{ job, specHash string }

type fakeJob struct {
	job batch.Job
	due time.Time
}

type fakeStageKey struct {
	job string
	idx int
}

type fakeStage struct {
	st      batch.Stage
	planned bool // SetStagePlan ran: a plan of zero tasks is still a plan
	due     time.Time
}

type fakeShardKey struct {
	job          string
	stage, shard int
}

type fakeCounter struct {
	left          int
	recIn, recOut int64
	failures      int
}

type fakeTask struct {
	t             batch.Task
	recIn, recOut int64
	due           time.Time
}

type fakeAttemptKey struct {
	ref     batch.TaskRef
	attempt int
}

// fakeStore is an in-memory Store. One mutex serialises every method, so
// each call is atomic, like the conditional write or transaction it
// stands for. It implements every port method itself: one it cannot
// model answers errFakeUnsupported, naming itself, and never pretends the
// feature is absent.
type fakeStore struct {
	log *journal

	mu            sync.Mutex
	before, after faultHook
	calls         map[string]int
	idem          map[string]fakeIdem
	jobs          map[string]*fakeJob
	stages        map[fakeStageKey]*fakeStage
	counters      map[fakeShardKey]*fakeCounter
	tasks         map[batch.TaskRef]*fakeTask
	slots         map[dynamo.SlotMap]map[batch.TaskRef]time.Time
	ends          map[fakeAttemptKey]batch.AttemptEnd
	alive         map[string]time.Time // executor id -> promised until
	mem           map[string]dynamo.ExecutorMemory
	timeline      []batch.AttemptEnd // task events of the timeline only
	taskNames     []string
	programs      []string
}

func newFakeStore(log *journal) *fakeStore {
	return &fakeStore{
		log:      log,
		calls:    map[string]int{},
		idem:     map[string]fakeIdem{},
		jobs:     map[string]*fakeJob{},
		stages:   map[fakeStageKey]*fakeStage{},
		counters: map[fakeShardKey]*fakeCounter{},
		tasks:    map[batch.TaskRef]*fakeTask{},
		slots:    map[dynamo.SlotMap]map[batch.TaskRef]time.Time{},
		ends:     map[fakeAttemptKey]batch.AttemptEnd{},
		alive:    map[string]time.Time{},
		mem:      map[string]dynamo.ExecutorMemory{},
	}
}

// setFaults installs the hooks consulted before and after each call.
func (f *fakeStore) setFaults(before, after faultHook) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.before, f.after = before, after
}

// callCount is how often method was called, whatever its outcome.
func (f *fakeStore) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

// fakeCall runs one port call: the before hook, then fn under the mutex,
// then, if fn applied, the after hook. Hooks run outside the mutex so
// that one may call the store itself (another process acting meanwhile).
func fakeCall[T any](f *fakeStore, method string, fn func() (T, error)) (T, error) {
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

// fakeDo is fakeCall for methods that return only an error.
func fakeDo(f *fakeStore, method string, fn func() error) error {
	_, err := fakeCall(f, method, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// ---- jobs ----

func (f *fakeStore) CreateJob(_ context.Context, p dynamo.CreateJobParams) (string, bool, error) {
	type res struct {
		id      string
		created bool
	}
	r, err := fakeCall(f, "CreateJob", func() (res, error) {
		if p.Firing != nil {
			panic("fakeStore: schedule firings are not faked")
		}
		j := p.Job
		ik := j.Owner + "#" + p.IdemKey
		if prev, ok := f.idem[ik]; ok {
			if prev.specHash != j.SpecHash {
				return res{id: prev.job}, batch.ErrIdempotencyConflict
			}
			return res{id: prev.job}, nil
		}
		if _, ok := f.jobs[j.ID]; ok {
			return res{}, fmt.Errorf("create job %s: id taken", j.ID)
		}
		f.idem[ik] = fakeIdem{job: j.ID, specHash: j.SpecHash}
		j.State = sm.JobRunning
		j.Created, j.Updated = msTime(j.Created), msTime(j.Created)
		f.jobs[j.ID] = &fakeJob{job: j, due: msTime(p.JobDue)}
		roots := j.Spec.Roots()
		for i, st := range j.Spec.Stages {
			s := &fakeStage{st: batch.Stage{Job: j.ID, Index: i, Name: st.Name, State: sm.StageBlocked}}
			if slices.Contains(roots, i) {
				s.due = msTime(p.StageDue)
			}
			f.stages[fakeStageKey{j.ID, i}] = s
		}
		if j.Spec.MaxConcurrency > 0 {
			f.slots[dynamo.JobSlots(j.ID)] = map[batch.TaskRef]time.Time{}
		}
		return res{id: j.ID, created: true}, nil
	})
	return r.id, r.created, err
}

func (f *fakeStore) GetJob(_ context.Context, id string) (batch.Job, error) {
	return fakeCall(f, "GetJob", func() (batch.Job, error) {
		j, ok := f.jobs[id]
		if !ok {
			return batch.Job{}, fmt.Errorf("get job %s: %w", id, batch.ErrNotFound)
		}
		return j.job, nil
	})
}

func (f *fakeStore) JobState(_ context.Context, id string) (sm.JobState, error) {
	return fakeCall(f, "JobState", func() (sm.JobState, error) {
		j, ok := f.jobs[id]
		if !ok {
			return "", fmt.Errorf("read job %s status: %w", id, batch.ErrNotFound)
		}
		return j.job.State, nil
	})
}

// EndJob: sm.ErrInvalidTransition when the job already ended.
func (f *fakeStore) EndJob(_ context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) error {
	return fakeDo(f, "EndJob", func() error {
		j, ok := f.jobs[id]
		if !ok {
			return fmt.Errorf("%s job %s: %w", ev, id, batch.ErrNotFound)
		}
		tr := sm.Jobs.Transition(ev)
		if !slices.Contains(tr.From, j.job.State) {
			return fmt.Errorf("%s job %s (%s): %w", ev, id, j.job.State, sm.ErrInvalidTransition)
		}
		j.job.State = tr.To
		j.job.Updated, j.job.Ended = msTime(now), msTime(now)
		if reason != "" {
			j.job.Error = reason
		}
		if manifest != "" {
			j.job.Manifest = manifest
		}
		j.due = time.Time{}
		f.log.add("job %s %s", id, ev)
		return nil
	})
}

// StartPublishing: RUNNING to PUBLISHING, sm.ErrInvalidTransition
// otherwise; the job keeps no deadline entry.
func (f *fakeStore) StartPublishing(_ context.Context, id string, now time.Time) error {
	return fakeDo(f, "StartPublishing", func() error {
		j, ok := f.jobs[id]
		if !ok {
			return fmt.Errorf("publish job %s: %w", id, batch.ErrNotFound)
		}
		tr := sm.Jobs.Transition(sm.JobPublish)
		if !slices.Contains(tr.From, j.job.State) {
			return fmt.Errorf("publish job %s (%s): %w", id, j.job.State, sm.ErrInvalidTransition)
		}
		j.job.State = tr.To
		j.job.Updated = msTime(now)
		j.due = time.Time{}
		f.log.add("job %s %s", id, sm.JobPublish)
		return nil
	})
}

// ---- stages ----

func (f *fakeStore) ListStages(_ context.Context, job string) ([]batch.Stage, error) {
	return fakeCall(f, "ListStages", func() ([]batch.Stage, error) {
		var out []batch.Stage
		for k, s := range f.stages {
			if k.job == job {
				out = append(out, s.st)
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
		return out, nil
	})
}

func (f *fakeStore) GetStage(_ context.Context, job string, idx int) (batch.Stage, error) {
	return fakeCall(f, "GetStage", func() (batch.Stage, error) {
		s, ok := f.stages[fakeStageKey{job, idx}]
		if !ok {
			return batch.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, batch.ErrNotFound)
		}
		return s.st, nil
	})
}

// TransitionStage: exactly one caller wins; the others get
// sm.ErrInvalidTransition, which also wraps batch.ErrJobNotRunning when
// the transition is guarded by sm.GuardJobRunning and the job has ended.
func (f *fakeStore) TransitionStage(_ context.Context, p dynamo.StageTransitionParams) error {
	return fakeDo(f, "TransitionStage", func() error {
		tr := sm.Stages.Transition(p.Event)
		if slices.Contains(tr.Guards, sm.GuardJobRunning) {
			if j, ok := f.jobs[p.Job]; !ok || j.job.State != sm.JobRunning {
				return fmt.Errorf("%s stage %s/%d: %w: %w", p.Event, p.Job, p.Stage, batch.ErrJobNotRunning, sm.ErrInvalidTransition)
			}
		}
		if p.Redrives != nil {
			if j, ok := f.jobs[p.Job]; !ok || len(j.job.Redrives) != *p.Redrives {
				return fmt.Errorf("%s stage %s/%d: the job was redriven since: %w", p.Event, p.Job, p.Stage, sm.ErrInvalidTransition)
			}
		}
		s, ok := f.stages[fakeStageKey{p.Job, p.Stage}]
		if !ok || !slices.Contains(tr.From, s.st.State) {
			return fmt.Errorf("%s stage %s/%d: %w", p.Event, p.Job, p.Stage, sm.ErrInvalidTransition)
		}
		now := msTime(p.Now)
		s.st.State = tr.To
		if tr.To == sm.StageRunning {
			s.st.Started, s.st.Materialized = now, false
		} else {
			s.st.Ended = now
		}
		if p.Reason != "" {
			s.st.Error = p.Reason
		}
		s.due = msTime(p.Due)
		f.log.add("stage %s/%d %s", p.Job, p.Stage, p.Event)
		return nil
	})
}

// ChargeStagePlan: the fake counts no quota.
func (f *fakeStore) ChargeStagePlan(context.Context, dynamo.PlanChargeParams) error { return nil }

// SetStagePlan records the plan once; a second call keeps the first.
func (f *fakeStore) SetStagePlan(_ context.Context, job string, idx, total int) (batch.Stage, error) {
	return fakeCall(f, "SetStagePlan", func() (batch.Stage, error) {
		s, ok := f.stages[fakeStageKey{job, idx}]
		if !ok {
			return batch.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, batch.ErrNotFound)
		}
		if !s.planned {
			s.planned = true
			s.st.Total, s.st.Shards = total, dynamo.ShardCount(total)
		}
		return s.st, nil
	})
}

// MarkMaterialized: sm.ErrInvalidTransition unless the stage is RUNNING.
func (f *fakeStore) MarkMaterialized(_ context.Context, job string, idx int, due time.Time) error {
	return fakeDo(f, "MarkMaterialized", func() error {
		s, ok := f.stages[fakeStageKey{job, idx}]
		if !ok || s.st.State != sm.StageRunning {
			return fmt.Errorf("mark stage %s/%d materialized: %w", job, idx, sm.ErrInvalidTransition)
		}
		s.st.Materialized = true
		s.due = msTime(due)
		return nil
	})
}

// AdvanceEnqueued moves the count from from to to, and says whether it
// did: a stale from is not an error.
func (f *fakeStore) AdvanceEnqueued(_ context.Context, job string, idx, from, to int, due time.Time) (bool, error) {
	return fakeCall(f, "AdvanceEnqueued", func() (bool, error) {
		s, ok := f.stages[fakeStageKey{job, idx}]
		if !ok || s.st.Enqueued != from {
			return false, nil
		}
		s.st.Enqueued = to
		s.due = msTime(due)
		return true, nil
	})
}

// ---- counters ----

// PutShards creates the counters that do not exist, each starting at the
// number of tasks that count it down.
func (f *fakeStore) PutShards(_ context.Context, job string, idx, total, shards int) error {
	return fakeDo(f, "PutShards", func() error {
		for k, n := range dynamo.ShardSizes(total, shards) {
			key := fakeShardKey{job, idx, k}
			if _, ok := f.counters[key]; ok {
				continue
			}
			f.counters[key] = &fakeCounter{left: n}
		}
		return nil
	})
}

func (f *fakeStore) ShardLeft(_ context.Context, job string, idx, shard int) (int, error) {
	return fakeCall(f, "ShardLeft", func() (int, error) {
		c, ok := f.counters[fakeShardKey{job, idx, shard}]
		if !ok {
			return 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, job, idx, batch.ErrNotFound)
		}
		return c.left, nil
	})
}

func (f *fakeStore) Progress(_ context.Context, st batch.Stage) (batch.Progress, error) {
	return fakeCall(f, "Progress", func() (batch.Progress, error) {
		p := batch.Progress{Total: st.Total}
		for k := 0; k < st.Shards; k++ {
			c, ok := f.counters[fakeShardKey{st.Job, st.Index, k}]
			if !ok {
				p.Missing++
				continue
			}
			p.Left += c.left
		}
		p.Committed = st.Total - p.Left
		if p.Missing > 0 {
			p.Committed = 0
		}
		return p, nil
	})
}

// ---- tasks ----

// PutTasks creates the tasks that do not exist; an existing one (claimed,
// committed) is never reset. Only the fields the adapter writes are kept.
func (f *fakeStore) PutTasks(_ context.Context, tasks []batch.Task, due time.Time) error {
	return fakeDo(f, "PutTasks", func() error {
		for _, t := range tasks {
			if _, ok := f.tasks[t.Ref]; ok {
				continue
			}
			f.tasks[t.Ref] = &fakeTask{t: batch.Task{
				Ref: t.Ref, State: t.State, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
				Input: t.Input, Updated: msTime(t.Updated),
			}, due: msTime(due)}
		}
		return nil
	})
}

func (f *fakeStore) GetTask(_ context.Context, ref batch.TaskRef) (batch.Task, error) {
	return fakeCall(f, "GetTask", func() (batch.Task, error) {
		t, ok := f.tasks[ref]
		if !ok {
			return batch.Task{}, fmt.Errorf("get task %s: %w", ref, batch.ErrNotFound)
		}
		return t.t, nil
	})
}

// ListStageTasks lists a stage's tasks bucket by bucket, as the adapter's
// Queries do: every task in the buckets that total spans, by partition.
func (f *fakeStore) ListStageTasks(_ context.Context, job string, stage, total int) ([]batch.Task, error) {
	return fakeCall(f, "ListStageTasks", func() ([]batch.Task, error) {
		limit := (total + dynamo.TaskBucket - 1) / dynamo.TaskBucket * dynamo.TaskBucket
		out := make([]batch.Task, 0, total)
		for ref, t := range f.tasks {
			if ref.Job == job && ref.Stage == stage && ref.Partition < limit {
				out = append(out, t.t)
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Ref.Partition < out[b].Ref.Partition })
		return out, nil
	})
}

// ClaimTask claims a READY task whose backoff has passed, or takes over a
// CLAIMED one whose lease expired with attempts left. Otherwise it
// returns the task with *batch.ClaimHeldError, *batch.NotDueError,
// batch.ErrAlreadyDone, or sm.ErrInvalidTransition (an expired claim
// with no attempts left).
func (f *fakeStore) ClaimTask(_ context.Context, p dynamo.ClaimParams) (batch.Task, error) {
	return fakeCall(f, "ClaimTask", func() (batch.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return batch.Task{}, fmt.Errorf("claim task %s: get task %s: %w", p.Ref, p.Ref, batch.ErrNotFound)
		}
		now := msTime(p.Now)
		in := sm.TaskInput{At: now}
		_, cerr := sm.Decide(ft.t.View(), sm.TaskClaim, in)
		_, rerr := sm.Decide(ft.t.View(), sm.TaskReclaim, in)
		if cerr != nil && rerr != nil {
			if ft.t.State == sm.TaskClaimed && ft.t.Token == p.Token {
				return ft.t, nil // our own claim, retried
			}
			return ft.t, fakeExplainClaim(ft.t, now)
		}
		t := &ft.t
		t.State = sm.TaskClaimed
		t.Attempt++
		t.Token = p.Token
		t.LeaseUntil = msTime(now.Add(p.Lease))
		t.Updated, t.Claimed = now, now
		if !p.SlotAt.IsZero() {
			t.SlotAt = msTime(p.SlotAt)
		}
		t.Executor = p.Executor // a claim without one removes the old
		ft.due = msTime(t.LeaseUntil.Add(p.Grace))
		return *t, nil
	})
}

// fakeExplainClaim is the adapter's explainClaim: the refusal's outcome,
// from the same rules.
func fakeExplainClaim(t batch.Task, now time.Time) error {
	if sm.Tasks.IsTerminal(t.State) {
		return fmt.Errorf("claim task %s (%s): %w", t.Ref, t.State, batch.ErrAlreadyDone)
	}
	if t.State == sm.TaskReady {
		return &batch.NotDueError{At: t.NotBefore}
	}
	_, err := sm.Decide(t.View(), sm.TaskReclaim, sm.TaskInput{At: now})
	var ge *sm.GuardError
	if errors.As(err, &ge) && ge.Guard == sm.GuardLeaseExpired {
		return &batch.ClaimHeldError{LeaseUntil: t.LeaseUntil.Add(sm.LeaseSkew)}
	}
	if errors.As(err, &ge) && ge.Guard == sm.GuardAttemptsLeft {
		return fmt.Errorf("claim task %s: lease expired on attempt %d of %d: %w", t.Ref, t.Attempt, t.MaxAttempts, sm.ErrInvalidTransition)
	}
	return &batch.ClaimHeldError{LeaseUntil: now.Add(time.Second)}
}

// Heartbeat extends the holder's lease; batch.ErrStaleClaim otherwise.
func (f *fakeStore) Heartbeat(_ context.Context, p dynamo.HolderParams, lease, grace time.Duration) error {
	return fakeDo(f, "Heartbeat", func() error {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return fmt.Errorf("heartbeat task %s: %w", p.Ref, batch.ErrStaleClaim)
		}
		now := msTime(p.Now)
		if _, err := sm.Decide(ft.t.View(), sm.TaskHeartbeat, sm.TaskInput{At: now, Token: p.Token}); err != nil {
			return fmt.Errorf("heartbeat task %s (%v): %w", p.Ref, err, batch.ErrStaleClaim)
		}
		ft.t.LeaseUntil = msTime(now.Add(lease))
		ft.t.Updated = now
		ft.due = msTime(ft.t.LeaseUntil.Add(grace))
		return nil
	})
}

// CommitTask commits the holder's attempt and counts its shard down
// together, and says whether that emptied the shard. A repeat of a
// commit that applied recognises its own success (and counts nothing);
// any other refusal is batch.ErrStaleClaim or batch.ErrAlreadyDone.
func (f *fakeStore) CommitTask(_ context.Context, p dynamo.CommitParams) (bool, error) {
	return fakeCall(f, "CommitTask", func() (bool, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return false, fmt.Errorf("commit task %s: get task %s: %w", p.Ref, p.Ref, batch.ErrNotFound)
		}
		shard := fakeShardKey{p.Ref.Job, p.Ref.Stage, dynamo.ShardOf(p.Ref.Partition, p.Shards)}
		now := msTime(p.Now)
		_, err := sm.Decide(ft.t.View(), sm.TaskCommit, sm.TaskInput{At: now, Token: p.Token})
		if err == nil && ft.t.Attempt == p.Attempt {
			c, ok := f.counters[shard]
			if !ok {
				return false, fmt.Errorf("commit task %s: counter %d missing: transaction cancelled", p.Ref, shard.shard)
			}
			t := &ft.t
			t.State, t.CommittedAttempt, t.Outputs, t.Updated = sm.TaskSucceeded, p.Attempt, p.Outputs, now
			t.LeaseUntil = time.Time{}
			ft.recIn, ft.recOut, ft.due = p.RecordsIn, p.RecordsOut, time.Time{}
			c.left--
			c.recIn += p.RecordsIn
			c.recOut += p.RecordsOut
			return c.left == 0, nil
		}
		t := ft.t
		switch {
		case t.State == sm.TaskSucceeded && t.Token == p.Token && t.CommittedAttempt == p.Attempt:
			c, ok := f.counters[shard]
			if !ok {
				return false, fmt.Errorf("read counter %d of stage %s/%d: %w", shard.shard, p.Ref.Job, p.Ref.Stage, batch.ErrNotFound)
			}
			return c.left == 0, nil
		case sm.Tasks.IsTerminal(t.State):
			return false, fmt.Errorf("commit task %s attempt %d: task is %s: %w", p.Ref, p.Attempt, t.State, batch.ErrAlreadyDone)
		case t.Token != p.Token:
			return false, fmt.Errorf("commit task %s attempt %d: current attempt is %d: %w", p.Ref, p.Attempt, t.Attempt, batch.ErrStaleClaim)
		}
		return false, fmt.Errorf("commit task %s: transaction cancelled: task %s attempt %d", p.Ref, t.State, t.Attempt)
	})
}

// CountCommits is not used: the fake's services count as they commit.
func (f *fakeStore) CountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error) {
	return nil, errors.New("fake store: no batched counts")
}

// EnsureCounted finds every committed task counted: the fake's commit
// counts in the same step.
func (f *fakeStore) EnsureCounted(context.Context, batch.TaskRef, int) (bool, bool, error) {
	return false, false, nil
}

// ReleaseTask applies the holder's retry or fail; batch.ErrStaleClaim if
// the rules refuse it.
func (f *fakeStore) ReleaseTask(_ context.Context, p dynamo.ReleaseParams) (batch.Task, error) {
	return fakeCall(f, "ReleaseTask", func() (batch.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return batch.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, batch.ErrStaleClaim)
		}
		now := msTime(p.Now)
		tr, err := sm.Decide(ft.t.View(), p.Event, sm.TaskInput{At: now, Token: p.Token})
		if err != nil {
			return batch.Task{}, fmt.Errorf("%s task %s (%v): %w", p.Event, p.Ref, err, batch.ErrStaleClaim)
		}
		t := &ft.t
		t.State, t.LastError, t.Updated = tr.To, p.Err, now
		if p.Class != batch.ClassNone {
			t.ErrorClass = p.Class
		}
		if p.Memory > 0 {
			t.Memory = p.Memory
		}
		if !p.NotBefore.IsZero() {
			t.NotBefore = msTime(p.NotBefore)
		}
		ft.due = msTime(p.Due)
		return *t, nil
	})
}

// SweepTask applies a non-holder event; sm.ErrInvalidTransition means the
// task moved on.
func (f *fakeStore) SweepTask(_ context.Context, p dynamo.SweepTaskParams) error {
	return fakeDo(f, "SweepTask", func() error {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return fmt.Errorf("%s task %s: %w", p.Event, p.Ref, sm.ErrInvalidTransition)
		}
		now := msTime(p.Now)
		tr, err := sm.Decide(ft.t.View(), p.Event, sm.TaskInput{At: now})
		if err != nil {
			return fmt.Errorf("%s task %s: %w", p.Event, p.Ref, err)
		}
		ft.t.State, ft.t.Updated = tr.To, now
		if p.Err != "" {
			ft.t.LastError = p.Err
		}
		ft.due = msTime(p.Due)
		return nil
	})
}

// ---- executor liveness ----

// RenewExecutor records that executor id lives until until; a promise is
// never moved back.
func (f *fakeStore) RenewExecutor(_ context.Context, id string, until time.Time) error {
	return fakeDo(f, "RenewExecutor", func() error {
		if cur, ok := f.alive[id]; !ok || !cur.After(msTime(until)) {
			f.alive[id] = msTime(until)
		}
		return nil
	})
}

// ExecutorAlive reads until when id promised to live; zero without a
// record.
func (f *fakeStore) ExecutorAlive(_ context.Context, id string) (time.Time, error) {
	return fakeCall(f, "ExecutorAlive", func() (time.Time, error) { return f.alive[id], nil })
}

// TakeoverTask applies a takeover if the holder's claim is still the
// task's and the rules, given the holder's liveness record, allow it;
// sm.ErrInvalidTransition otherwise.
func (f *fakeStore) TakeoverTask(_ context.Context, p dynamo.TakeoverParams) (batch.Task, error) {
	return fakeCall(f, "TakeoverTask", func() (batch.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok || ft.t.Token != p.Holder.Token {
			return batch.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, sm.ErrInvalidTransition)
		}
		now := msTime(p.Now)
		view := ft.t.View()
		view.HolderAlive = f.alive[p.Holder.Executor]
		tr, err := sm.Decide(view, sm.TaskTakeover, sm.TaskInput{At: now})
		if err != nil {
			return batch.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, err)
		}
		t := &ft.t
		t.State, t.Updated, t.Claimed = tr.To, now, now
		t.Attempt++
		t.Token, t.LeaseUntil = p.Token, msTime(now.Add(p.Lease))
		if !p.SlotAt.IsZero() {
			t.SlotAt = msTime(p.SlotAt)
		}
		t.Executor = p.Executor // a claim without one removes the old
		ft.due = msTime(t.LeaseUntil.Add(p.Grace))
		return *t, nil
	})
}

// ---- the sweep index ----

// fakeDueShard spreads the index over dynamo.DueShards as the adapter's
// gpk does, so the sweep's per-shard loop is exercised.
func fakeDueShard(it dynamo.DueItem) int {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s|%s|%d|%s", it.Kind, it.Job, it.Stage, it.Task)
	return int(h.Sum32() % dynamo.DueShards)
}

// DueItems returns up to limit records of one shard due at now, earliest
// first.
func (f *fakeStore) DueItems(_ context.Context, shard int, now time.Time, limit int) ([]dynamo.DueItem, error) {
	return fakeCall(f, "DueItems", func() ([]dynamo.DueItem, error) {
		type entry struct {
			it  dynamo.DueItem
			due time.Time
		}
		var es []entry
		add := func(it dynamo.DueItem, due time.Time) {
			if !due.IsZero() && !due.After(now) && fakeDueShard(it) == shard {
				es = append(es, entry{it, due})
			}
		}
		for id, j := range f.jobs {
			add(dynamo.DueItem{Kind: dynamo.DueJob, Job: id}, j.due)
		}
		for k, s := range f.stages {
			add(dynamo.DueItem{Kind: dynamo.DueStage, Job: k.job, Stage: k.idx}, s.due)
		}
		for ref, t := range f.tasks {
			add(dynamo.DueItem{Kind: dynamo.DueTask, Job: ref.Job, Stage: ref.Stage, Task: ref}, t.due)
		}
		sort.Slice(es, func(a, b int) bool {
			if !es[a].due.Equal(es[b].due) {
				return es[a].due.Before(es[b].due)
			}
			return fmt.Sprint(es[a].it) < fmt.Sprint(es[b].it)
		})
		out := make([]dynamo.DueItem, 0, min(len(es), limit))
		for _, e := range es[:min(len(es), limit)] {
			out = append(out, e.it)
		}
		return out, nil
	})
}

// SetDue puts a record in the index at due, or takes it out (zero). A
// record that does not exist is left alone.
func (f *fakeStore) SetDue(_ context.Context, it dynamo.DueItem, due time.Time) error {
	return fakeDo(f, "SetDue", func() error {
		due = msTime(due)
		switch it.Kind {
		case dynamo.DueJob:
			if j, ok := f.jobs[it.Job]; ok {
				j.due = due
			}
		case dynamo.DueStage:
			if s, ok := f.stages[fakeStageKey{it.Job, it.Stage}]; ok {
				s.due = due
			}
		default:
			if t, ok := f.tasks[it.Task]; ok {
				t.due = due
			}
		}
		return nil
	})
}

// UnindexTask takes a task out of the index unless it changed since t
// was read (state or update time).
func (f *fakeStore) UnindexTask(_ context.Context, t batch.Task) error {
	return fakeDo(f, "UnindexTask", func() error {
		if ft, ok := f.tasks[t.Ref]; ok && ft.t.State == t.State && ft.t.Updated.Equal(msTime(t.Updated)) {
			ft.due = time.Time{}
		}
		return nil
	})
}

// ShardEmptied says every shard is empty: the fake's completion checks
// read the counters each time, as before the set.
func (f *fakeStore) ShardEmptied(context.Context, string, int, int) (bool, error) { return true, nil }

func (f *fakeStore) HurryStage(_ context.Context, job string, stage int, due time.Time) error {
	return fakeDo(f, "HurryStage", func() error {
		due = msTime(due)
		if s, ok := f.stages[fakeStageKey{job, stage}]; ok && s.st.State == sm.StageRunning && (s.due.IsZero() || s.due.After(due)) {
			s.due = due
		}
		return nil
	})
}

// dueOf reads a record's place in the index (zero: not in it), for tests.
func (f *fakeStore) dueOf(it dynamo.DueItem) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch it.Kind {
	case dynamo.DueJob:
		if j, ok := f.jobs[it.Job]; ok {
			return j.due
		}
	case dynamo.DueStage:
		if s, ok := f.stages[fakeStageKey{it.Job, it.Stage}]; ok {
			return s.due
		}
	default:
		if t, ok := f.tasks[it.Task]; ok {
			return t.due
		}
	}
	return time.Time{}
}

// ---- concurrency slots ----

func fakeOwnerMap(m dynamo.SlotMap) bool { return strings.HasPrefix(m.String(), "owner ") }

// AcquireSlot takes a slot for ref if the map has room: SlotTaken, or
// SlotHeld with the held stamp, or SlotsFull. An owner's map is created by
// its first acquire; a job's exists from the job's creation.
func (f *fakeStore) AcquireSlot(_ context.Context, m dynamo.SlotMap, ref batch.TaskRef, limit int, at time.Time) (dynamo.SlotOutcome, time.Time, error) {
	type res struct {
		out  dynamo.SlotOutcome
		held time.Time
	}
	r, err := fakeCall(f, "AcquireSlot", func() (res, error) {
		sl, ok := f.slots[m]
		if !ok {
			if !fakeOwnerMap(m) {
				return res{}, fmt.Errorf("acquire %s slot for %s: read slots: %w", m, ref, batch.ErrNotFound)
			}
			f.slots[m] = map[batch.TaskRef]time.Time{ref: msTime(at)}
			return res{out: dynamo.SlotTaken}, nil
		}
		if held, ok := sl[ref]; ok {
			return res{out: dynamo.SlotHeld, held: held}, nil
		}
		if len(sl) >= limit {
			return res{out: dynamo.SlotsFull}, nil
		}
		sl[ref] = msTime(at)
		return res{out: dynamo.SlotTaken}, nil
	})
	return r.out, r.held, err
}

// RestampSlot moves ref's slot from stamp from to stamp to; false if it no
// longer has stamp from.
func (f *fakeStore) RestampSlot(_ context.Context, m dynamo.SlotMap, ref batch.TaskRef, from, to time.Time) (bool, error) {
	return fakeCall(f, "RestampSlot", func() (bool, error) {
		sl := f.slots[m]
		if held, ok := sl[ref]; !ok || !held.Equal(msTime(from)) {
			return false, nil
		}
		sl[ref] = msTime(to)
		return true, nil
	})
}

// ReleaseSlot frees ref's slot (only the one stamped at, if at is set).
// Releasing a free slot is a no-op.
func (f *fakeStore) ReleaseSlot(_ context.Context, m dynamo.SlotMap, ref batch.TaskRef, at time.Time) error {
	return fakeDo(f, "ReleaseSlot", func() error {
		sl := f.slots[m]
		if held, ok := sl[ref]; ok && (at.IsZero() || held.Equal(msTime(at))) {
			delete(sl, ref)
		}
		return nil
	})
}

func (f *fakeStore) SlotHolders(_ context.Context, m dynamo.SlotMap) (map[batch.TaskRef]time.Time, error) {
	return fakeCall(f, "SlotHolders", func() (map[batch.TaskRef]time.Time, error) {
		sl, ok := f.slots[m]
		if !ok {
			return nil, fmt.Errorf("read slots of %s: %w", m, batch.ErrNotFound)
		}
		out := make(map[batch.TaskRef]time.Time, len(sl))
		for r, at := range sl {
			out[r] = at
		}
		return out, nil
	})
}

// ---- attempt ends (the only write of the read-side interface) ----

// RecordAttemptEnd records an attempt's end once: a repeat reports false.
func (f *fakeStore) RecordAttemptEnd(_ context.Context, p dynamo.AttemptEndParams) (bool, error) {
	return fakeCall(f, "RecordAttemptEnd", func() (bool, error) {
		k := fakeAttemptKey{p.End.Ref, p.End.Attempt}
		if _, ok := f.ends[k]; ok {
			return false, nil
		}
		f.ends[k] = p.End
		if p.Shards > 0 {
			if c, ok := f.counters[fakeShardKey{p.End.Ref.Job, p.End.Ref.Stage, dynamo.ShardOf(p.End.Ref.Partition, p.Shards)}]; ok {
				c.failures++
			}
		}
		return true, nil
	})
}

// attemptEnd reads the recorded end of one attempt, for tests.
func (f *fakeStore) attemptEnd(ref batch.TaskRef, attempt int) (batch.AttemptEnd, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.ends[fakeAttemptKey{ref, attempt}]
	return e, ok
}

// The other read-side routes are not under test here.

func (f *fakeStore) ListOwnerJobs(context.Context, dynamo.ListJobsParams) ([]batch.JobSummary, string, error) {
	panic("fakeStore: ListOwnerJobs is not faked (read-side routes are out of these tests' scope)")
}

// ListTaskPage reads a stage's tasks after p.After bucket by bucket, as
// the adapter's Queries do: each read evaluates at most the rows the page
// still wants (before the state filter, like a Query's Limit) and stops at
// its bucket's end.
func (f *fakeStore) ListTaskPage(_ context.Context, p dynamo.TaskPageParams) (dynamo.TaskPage, error) {
	return fakeCall(f, "ListTaskPage", func() (dynamo.TaskPage, error) {
		pg := dynamo.TaskPage{Next: p.After}
		for pg.Next+1 < p.Total && len(pg.Rows) < p.Limit && pg.Reads < max(p.MaxReads, 1) {
			b := (pg.Next + 1) / dynamo.TaskBucket
			pg.Reads++
			var bucket []batch.Task
			for ref, t := range f.tasks {
				if ref.Job == p.Job && ref.Stage == p.Stage && ref.Partition/dynamo.TaskBucket == b && ref.Partition > pg.Next {
					bucket = append(bucket, t.t)
				}
			}
			sort.Slice(bucket, func(i, j int) bool { return bucket[i].Ref.Partition < bucket[j].Ref.Partition })
			room := p.Limit - len(pg.Rows)
			read := bucket[:min(len(bucket), room)]
			for _, t := range read {
				if p.State == "" || t.State == p.State {
					pg.Rows = append(pg.Rows, batch.TaskRow{Task: t})
				}
			}
			if len(bucket) >= room {
				pg.Next = read[len(read)-1].Ref.Partition // the Query's LastEvaluatedKey
			} else {
				pg.Next = min((b+1)*dynamo.TaskBucket, p.Total) - 1
			}
		}
		pg.Done = pg.Next+1 >= p.Total
		return pg, nil
	})
}

// AttemptEnds returns the recorded ends of partitions from..to of a
// stage, by partition then attempt.
func (f *fakeStore) AttemptEnds(_ context.Context, job string, stage, from, to int) ([]batch.AttemptEnd, error) {
	return fakeCall(f, "AttemptEnds", func() ([]batch.AttemptEnd, error) {
		var out []batch.AttemptEnd
		for k, e := range f.ends {
			if k.ref.Job == job && k.ref.Stage == stage && k.ref.Partition >= from && k.ref.Partition <= to {
				out = append(out, e)
			}
		}
		sort.Slice(out, func(i, j int) bool {
			a, b := out[i], out[j]
			return a.Ref.Partition < b.Ref.Partition || (a.Ref.Partition == b.Ref.Partition && a.Attempt < b.Attempt)
		})
		return out, nil
	})
}

func (f *fakeStore) JobEvents(context.Context, string, string, int) ([]dynamo.TimelineEvent, error) {
	panic("fakeStore: JobEvents is not faked (read-side routes are out of these tests' scope)")
}

func (f *fakeStore) StageStats(context.Context, string) ([]batch.StageStats, error) {
	panic("fakeStore: StageStats is not faked (read-side routes are out of these tests' scope)")
}

func (f *fakeStore) PutRateSample(context.Context, string, int, time.Time, batch.RateSample) (bool, error) {
	panic("fakeStore: PutRateSample is not faked (read-side routes are out of these tests' scope)")
}

// checkInvariants fails t if the records disagree with each other in a
// way no sequence of correct steps allows. Tests run it at their end, so
// every scenario also checks these.
func (f *fakeStore) checkInvariants(t testing.TB) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	succeeded := map[fakeStageKey]int{}
	for ref, ft := range f.tasks {
		task := ft.t
		k := fakeStageKey{ref.Job, ref.Stage}
		if s, ok := f.stages[k]; !ok || !s.planned || ref.Partition >= s.st.Total {
			t.Errorf("invariant: task %s exists outside its stage's plan", ref)
		}
		if task.Attempt > task.MaxAttempts {
			t.Errorf("invariant: task %s ran attempt %d of %d", ref, task.Attempt, task.MaxAttempts)
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
				if c, ok := f.counters[fakeShardKey{k.job, k.idx, sh}]; ok {
					left += c.left
				} else {
					missing++
				}
			}
			if missing == 0 && left != s.st.Total-succeeded[k] {
				t.Errorf("invariant: stage %s/%d counts %d tasks left, but %d of %d succeeded", k.job, k.idx, left, succeeded[k], s.st.Total)
			}
		}
		if s.st.State == sm.StageCompleted && (!s.st.Materialized || succeeded[k] != s.st.Total) {
			t.Errorf("invariant: stage %s/%d COMPLETED with %d of %d tasks succeeded (materialized %v)", k.job, k.idx, succeeded[k], s.st.Total, s.st.Materialized)
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

// ---- queue --------------------------------------------------------------------

// sentMsg is one message the control plane sent.
type sentMsg struct {
	URL, Body string
	Delay     time.Duration
}

// fakeQueue records sends; Receive hands out messages a test planted
// (dead letters).
type fakeQueue struct {
	mu      sync.Mutex
	before  faultHook
	sent    []sentMsg
	planted map[string][]queue.Message
	deleted []string
}

func (q *fakeQueue) SendBatch(_ context.Context, url string, msgs []queue.Send) error {
	q.mu.Lock()
	before := q.before
	q.mu.Unlock()
	if before != nil {
		if err := before("SendBatch"); err != nil {
			return err
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, m := range msgs {
		q.sent = append(q.sent, sentMsg{URL: url, Body: m.Body, Delay: m.Delay})
	}
	return nil
}

func (q *fakeQueue) Receive(_ context.Context, url string, maxN int, _, _ time.Duration) ([]queue.Message, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	ms := q.planted[url]
	n := min(maxN, len(ms))
	q.planted[url] = ms[n:]
	return ms[:n], nil
}

func (q *fakeQueue) DeleteBatch(_ context.Context, _ string, receipts []string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.deleted = append(q.deleted, receipts...)
	return nil
}

func (q *fakeQueue) setFault(before faultHook) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.before = before
}

func (q *fakeQueue) plant(url string, msgs ...queue.Message) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.planted == nil {
		q.planted = map[string][]queue.Message{}
	}
	q.planted[url] = append(q.planted[url], msgs...)
}

// drain returns the messages sent since the last drain and forgets them:
// what an executor would receive (or what a test loses on purpose).
func (q *fakeQueue) drain() []sentMsg {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.sent
	q.sent = nil
	return out
}

// ---- blob -----------------------------------------------------------------------

const fakeBucket = "bw-bucket"

// fakeBlob is an in-memory bucket (and any input buckets a test fills).
type fakeBlob struct {
	log *journal

	mu     sync.Mutex
	before faultHook
	objs   map[string]map[string][]byte // bucket -> key -> body
	marked []string                     // MarkUncommitted prefixes, in order
	// listLimit, when set, ends a listing of more objects with the blob
	// adapter's *blob.ListLimitError.
	listLimit int
	// refused buckets answer every publishing write with blob.ErrRefused.
	refused map[string]bool
}

func newFakeBlob(log *journal) *fakeBlob {
	return &fakeBlob{log: log, objs: map[string]map[string][]byte{}, refused: map[string]bool{}}
}

func (b *fakeBlob) Bucket() string { return fakeBucket }

func (b *fakeBlob) hook(method string) error {
	b.mu.Lock()
	before := b.before
	b.mu.Unlock()
	if before == nil {
		return nil
	}
	return before(method)
}

func (b *fakeBlob) PutIfAbsent(_ context.Context, key string, body []byte) error {
	if err := b.hook("PutIfAbsent"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.objs[fakeBucket][key]; ok {
		return fmt.Errorf("put %s: %w", key, batch.ErrExists)
	}
	b.putLocked(fakeBucket, key, body)
	b.log.add("put %s", key)
	return nil
}

func (b *fakeBlob) Get(_ context.Context, key string) ([]byte, error) {
	if err := b.hook("Get"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[fakeBucket][key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, batch.ErrNotFound)
	}
	return body, nil
}

func (b *fakeBlob) List(_ context.Context, bucket, prefix string) ([]split.Object, error) {
	if err := b.hook("List"); err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []split.Object
	for k, body := range b.objs[bucket] {
		if strings.HasPrefix(k, prefix) {
			out = append(out, split.Object{Key: k, Size: int64(len(body))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if b.listLimit > 0 && len(out) > b.listLimit {
		l := blob.ListLimit{Objects: b.listLimit, KeyBytes: 1 << 40}
		return nil, &blob.ListLimitError{Bucket: bucket, Prefix: prefix, Limit: l, Objects: l.Objects + 1}
	}
	return out, nil
}

func (b *fakeBlob) MarkUncommitted(_ context.Context, prefix string) (int, error) {
	if err := b.hook("MarkUncommitted"); err != nil {
		return 0, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.marked = append(b.marked, prefix)
	n := 0
	for k := range b.objs[fakeBucket] {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n, nil
}

// ---- publishing ----

func (b *fakeBlob) PutIfAbsentIn(_ context.Context, bucket, key string, body []byte) error {
	if err := b.hook("PutIfAbsentIn"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused[bucket] {
		return fmt.Errorf("put s3://%s/%s: %w: AccessDenied", bucket, key, blob.ErrRefused)
	}
	if _, ok := b.objs[bucket][key]; ok {
		return fmt.Errorf("put %s: %w", key, batch.ErrExists)
	}
	b.putLocked(bucket, key, body)
	b.log.add("publish put s3://%s/%s", bucket, key)
	return nil
}

func (b *fakeBlob) CopyIfAbsent(_ context.Context, src, bucket, dst string) error {
	if err := b.hook("CopyIfAbsent"); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refused[bucket] {
		return fmt.Errorf("copy: %w: AccessDenied", blob.ErrRefused)
	}
	body, ok := b.objs[fakeBucket][src]
	if !ok {
		return fmt.Errorf("copy %s: NoSuchKey", src)
	}
	if _, ok := b.objs[bucket][dst]; ok {
		return fmt.Errorf("copy to %s: %w", dst, batch.ErrExists)
	}
	b.putLocked(bucket, dst, body)
	b.log.add("copy %s to s3://%s/%s", src, bucket, dst)
	return nil
}

func (b *fakeBlob) Open(_ context.Context, bucket, key string, start int64) (io.ReadCloser, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[bucket][key]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, batch.ErrNotFound)
	}
	return io.NopCloser(bytes.NewReader(body[start:])), nil
}

func (b *fakeBlob) ListPage(_ context.Context, bucket, prefix, after string) ([]string, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []string
	for k := range b.objs[bucket] {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > 2 {
		return keys[:2], true, nil
	}
	return keys, false, nil
}

// PresignGet: the fake cannot sign URLs.
func (b *fakeBlob) PresignGet(context.Context, string, time.Duration) (string, error) {
	return "", fmt.Errorf("fake: PresignGet not supported: %w", ErrPresignUnavailable)
}

// PinVersions: the fake's buckets are unversioned, where the adapter
// plans with the listed ETags alone.
func (b *fakeBlob) PinVersions(_ context.Context, _, _ string, objs []split.Object) ([]split.Object, error) {
	return objs, nil
}

func (b *fakeBlob) setFault(before faultHook) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.before = before
}

// put writes an object as a task function (or a test's input) would.
func (b *fakeBlob) put(bucket, key string, body []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.putLocked(bucket, key, body)
}

func (b *fakeBlob) putLocked(bucket, key string, body []byte) {
	if b.objs[bucket] == nil {
		b.objs[bucket] = map[string][]byte{}
	}
	b.objs[bucket][key] = body
}

func (b *fakeBlob) object(key string) ([]byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	body, ok := b.objs[fakeBucket][key]
	return body, ok
}

func (b *fakeBlob) markedPrefixes() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.marked)
}

// ---- clock and logger -----------------------------------------------------------

// fakeClock is the service's clock: tests move it past leases, backoffs
// and due times instead of waiting.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// testLogger writes to the test's output, shown for failures and -v only.
func testLogger(t testing.TB) *slog.Logger {
	var w io.Writer = io.Discard
	if tt, ok := t.(interface{ Output() io.Writer }); ok {
		w = tt.Output()
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
