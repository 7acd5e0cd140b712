package testdouble

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	sm "github.com/batchwork/batchwork/statemachine"
)

func (f *jobRecords) JobCreate(_ context.Context, p dynamo.CreateJobParams) (string, bool, error) {
	type res struct {
		id      string
		created bool
	}
	r, err := call(f.state, "JobCreate", func() (res, error) {
		if p.Firing != nil {
			panic("testdouble.Store: schedule firings are not faked")
		}
		j := p.Job
		ik := j.Owner + "#" + p.IdemKey
		if prev, ok := f.idem[ik]; ok {
			if prev.specHash != j.SpecHash {
				return res{id: prev.job}, domain.ErrIdempotencyConflict
			}
			return res{id: prev.job}, nil
		}
		if _, ok := f.jobs[j.ID]; ok {
			return res{}, fmt.Errorf("create job %s: id taken", j.ID)
		}
		f.idem[ik] = idemRow{job: j.ID, specHash: j.SpecHash}
		j.State = sm.JobRunning
		if !p.StartAt.IsZero() {
			j.State, j.StartAt = sm.JobWaiting, msTime(p.StartAt)
		}
		j.Created, j.Updated = msTime(j.Created), msTime(j.Created)
		f.jobs[j.ID] = &jobRow{job: j, due: msTime(p.JobDue)}
		roots := j.Spec.Roots()
		for i, st := range j.Spec.Stages {
			s := &stageRow{st: domain.Stage{Job: j.ID, Index: i, Name: st.Name, State: sm.StageBlocked, Trace: j.Trace}}
			if slices.Contains(roots, i) && j.State == sm.JobRunning {
				s.due = msTime(p.StageDue)
			}
			f.stages[stageKey{j.ID, i}] = s
		}
		if j.Spec.MaxConcurrency > 0 {
			f.slots[dynamo.JobSlots(j.ID)] = map[domain.TaskRef]time.Time{}
		}
		return res{id: j.ID, created: true}, nil
	})
	return r.id, r.created, err
}

func (f *jobRecords) JobGet(_ context.Context, id string) (domain.Job, error) {
	return call(f.state, "JobGet", func() (domain.Job, error) {
		j, ok := f.jobs[id]
		if !ok {
			return domain.Job{}, fmt.Errorf("get job %s: %w", id, domain.ErrNotFound)
		}
		return j.job, nil
	})
}

func (f *jobRecords) JobState(_ context.Context, id string) (sm.JobState, error) {
	return call(f.state, "JobState", func() (sm.JobState, error) {
		j, ok := f.jobs[id]
		if !ok {
			return "", fmt.Errorf("read job %s status: %w", id, domain.ErrNotFound)
		}
		return j.job.State, nil
	})
}

func (f *jobRecords) JobByIdemKey(_ context.Context, owner, idemKey string) (string, bool, error) {
	type res struct {
		id    string
		found bool
	}
	r, err := call(f.state, "JobByIdemKey", func() (res, error) {
		prev, ok := f.idem[owner+"#"+idemKey]
		return res{prev.job, ok}, nil
	})
	return r.id, r.found, err
}

// EndJob: sm.ErrInvalidTransition when the job already ended.
func (f *jobRecords) EndJob(_ context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) error {
	return do(f.state, "JobEnd", func() error {
		j, ok := f.jobs[id]
		if !ok {
			return fmt.Errorf("%s job %s: %w", ev, id, domain.ErrNotFound)
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
		f.log.Add("job %s %s", id, ev)
		return nil
	})
}

// EndJobEvent is EndJob naming the ended event of the job's redrive
// generation (events.JobEndedID), as the adapter's outbox does.
func (f *jobRecords) JobEndEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error) {
	return f.JobEndGen(ctx, id, ev, reason, manifest, now, -1)
}

// EndJobGen: sm.ErrInvalidTransition when the job was redriven since gen
// (gen >= 0) or already ended.
func (f *jobRecords) JobEndGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error) {
	f.mu.Lock()
	j, ok := f.jobs[id]
	n := 0
	if ok {
		n = len(j.job.Redrives)
	}
	f.mu.Unlock()
	if ok && gen >= 0 && n != gen {
		return "", fmt.Errorf("%s job %s: decided at redrive %d, the job is at %d: %w", ev, id, gen, n, sm.ErrInvalidTransition)
	}
	if err := f.EndJob(ctx, id, ev, reason, manifest, now); err != nil {
		return "", err
	}
	return events.JobEndedID(id, n), nil
}

func (f *jobRecords) JobRedriveCount(_ context.Context, id string) (int, error) {
	return call(f.state, "JobRedriveCount", func() (int, error) {
		j, ok := f.jobs[id]
		if !ok {
			return 0, fmt.Errorf("read job %s: %w", id, domain.ErrNotFound)
		}
		return len(j.job.Redrives), nil
	})
}

// StartPublishing: RUNNING to PUBLISHING, sm.ErrInvalidTransition
// otherwise; the job keeps no deadline entry.
func (f *jobRecords) JobStartPublishing(_ context.Context, id string, now time.Time) error {
	return do(f.state, "JobStartPublishing", func() error {
		j, ok := f.jobs[id]
		if !ok {
			return fmt.Errorf("publish job %s: %w", id, domain.ErrNotFound)
		}
		tr := sm.Jobs.Transition(sm.JobPublish)
		if !slices.Contains(tr.From, j.job.State) {
			return fmt.Errorf("publish job %s (%s): %w", id, j.job.State, sm.ErrInvalidTransition)
		}
		j.job.State = tr.To
		j.job.Updated = msTime(now)
		j.due = time.Time{}
		f.log.Add("job %s %s", id, sm.JobPublish)
		return nil
	})
}

// QuotaUse: the fake counts no quotas.
func (f *jobRecords) OwnerQuotaUse(context.Context, string) (dynamo.QuotaUse, error) {
	return dynamo.QuotaUse{}, errUnsupported("OwnerQuotaUse")
}

func (f *jobRecords) JobListByOwner(context.Context, dynamo.ListJobsParams) ([]domain.JobSummary, string, error) {
	panic("testdouble.Store: ListOwnerJobs is not faked (read-side routes are out of these tests' scope)")
}

// JobRedrive: FAILED to RUNNING while the job has p.Count redrives and
// its deletion has not begun, its end undone and the redrive logged;
// sm.ErrInvalidTransition otherwise. The fake counts no quotas, so a
// redrive under quota limits is refused rather than admitted unchecked.
func (f *jobRecords) JobRedrive(_ context.Context, p dynamo.RedriveJobParams) error {
	if p.Quota != nil {
		return errUnsupported("JobRedrive under quota limits")
	}
	return do(f.state, "JobRedrive", func() error {
		j, ok := f.jobs[p.ID]
		if !ok {
			return fmt.Errorf("redrive job %s: %w", p.ID, domain.ErrNotFound)
		}
		tr := sm.Jobs.Transition(sm.JobRedrive)
		if !slices.Contains(tr.From, j.job.State) || len(j.job.Redrives) != p.Count ||
			!j.job.DataDeleted.IsZero() || !j.job.Deleting.IsZero() {
			return fmt.Errorf("redrive job %s: %w", p.ID, sm.ErrInvalidTransition)
		}
		now := msTime(p.Now)
		j.job.State, j.job.Updated = tr.To, now
		j.job.Redrives = append(slices.Clone(j.job.Redrives), domain.Redrive{At: now, Error: p.PrevError})
		j.job.Ended, j.job.Error, j.job.Manifest = time.Time{}, "", ""
		j.due = msTime(p.FollowUp)
		f.log.Add("job %s %s", p.ID, sm.JobRedrive)
		return nil
	})
}

// StageRedrive: ev (sm.StageRedrive, sm.StageRedriveBlocked) from the
// states and start it leaves, while the job is RUNNING; its plan and
// counters stay. sm.ErrInvalidTransition otherwise.
func (f *jobRecords) StageRedrive(_ context.Context, job string, idx int, ev sm.Event, now, due time.Time) error {
	return do(f.state, "StageRedrive", func() error {
		tr := sm.Stages.Transition(ev)
		s, ok := f.stages[stageKey{job, idx}]
		j, jok := f.jobs[job]
		if !ok || !jok || j.job.State != sm.JobRunning || !slices.Contains(tr.From, s.st.State) ||
			slices.Contains(tr.Guards, sm.GuardStageStarted) && s.st.Started.IsZero() ||
			slices.Contains(tr.Guards, sm.GuardStageNeverStarted) && !s.st.Started.IsZero() {
			return fmt.Errorf("%s stage %s/%d: %w", ev, job, idx, sm.ErrInvalidTransition)
		}
		s.st.State, s.st.Ended, s.st.Error = tr.To, time.Time{}, ""
		s.due = msTime(due)
		f.log.Add("stage %s/%d %s", job, idx, ev)
		return nil
	})
}

// TaskRedrive puts a task back to READY with budget attempts more than
// it used, once per redrive: a task that had redrive gen's steps is the
// new generation's. Its continuations and its mark go.
// sm.ErrInvalidTransition otherwise.
func (f *jobRecords) TaskRedrive(_ context.Context, ref domain.TaskRef, budget, gen int, now, notBefore, due time.Time) error {
	return do(f.state, "TaskRedrive", func() error {
		ft, ok := f.tasks[ref]
		if !ok || ft.redriveGen >= gen {
			return fmt.Errorf("redrive task %s: %w", ref, sm.ErrInvalidTransition)
		}
		tr, err := sm.Decide(ft.t.View(), sm.TaskRedrive, sm.TaskInput{At: msTime(now)})
		if err != nil {
			return fmt.Errorf("redrive task %s: %w", ref, err)
		}
		t := &ft.t
		t.State, t.MaxAttempts, t.NotBefore, t.Updated = tr.To, t.Attempt+budget, msTime(notBefore), msTime(now)
		t.Checkpoint.Continuations, t.RedrivePending = 0, 0
		ft.redriveGen, ft.due = gen, msTime(due)
		return nil
	})
}

// TaskRaiseAttempts gives a CLAIMED or READY task budget attempts more
// than it used, once per redrive, and removes its mark; any other task
// is left alone without an error.
func (f *jobRecords) TaskRaiseAttempts(_ context.Context, ref domain.TaskRef, budget, gen int) error {
	return do(f.state, "TaskRaiseAttempts", func() error {
		ft, ok := f.tasks[ref]
		if ok && (ft.t.State == sm.TaskClaimed || ft.t.State == sm.TaskReady) && ft.redriveGen < gen {
			ft.t.MaxAttempts, ft.t.RedrivePending = ft.t.Attempt+budget, 0
			ft.redriveGen = gen
		}
		return nil
	})
}

// TaskMarkRedrive, while the job is FAILED with gen-1 redrives, marks a
// FAILED task for redrive gen, or gives a CLAIMED or READY one budget
// attempts more than it used; sm.ErrInvalidTransition once the job is
// anywhere else. One call is atomic here, so the adapter's mark after
// its raise (for an attempt that failed in between) has nothing to find.
func (f *jobRecords) TaskMarkRedrive(_ context.Context, ref domain.TaskRef, budget, gen int) error {
	return do(f.state, "TaskMarkRedrive", func() error {
		j, ok := f.jobs[ref.Job]
		if !ok || j.job.State != sm.JobFailed || len(j.job.Redrives) != gen-1 {
			return fmt.Errorf("mark task %s for redrive %d: %w", ref, gen, sm.ErrInvalidTransition)
		}
		ft, ok := f.tasks[ref]
		switch {
		case !ok:
		case ft.t.State == sm.TaskFailed:
			ft.t.RedrivePending = gen
		case budget > 0 && (ft.t.State == sm.TaskClaimed || ft.t.State == sm.TaskReady):
			ft.t.MaxAttempts = ft.t.Attempt + budget
		}
		return nil
	})
}

func (f *jobRecords) StageAdopt(context.Context, string, int, int) error {
	return errUnsupported("StageAdopt")
}

func (f *jobRecords) StageAdoptTolerated(context.Context, string, int, int) error {
	return errUnsupported("StageAdoptTolerated")
}

// MarkDataDeleted: sm.ErrInvalidTransition for a running job; the first
// time is kept.
func (f *jobRecords) JobMarkDataDeleted(_ context.Context, id string, now time.Time) (time.Time, error) {
	return call(f.state, "JobMarkDataDeleted", func() (time.Time, error) {
		j, ok := f.jobs[id]
		if !ok {
			return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, domain.ErrNotFound)
		}
		if !sm.Jobs.IsTerminal(j.job.State) {
			return time.Time{}, fmt.Errorf("mark job %s data deleted: %w", id, sm.ErrInvalidTransition)
		}
		if j.job.DataDeleted.IsZero() {
			j.job.DataDeleted = msTime(now)
		}
		return j.job.DataDeleted, nil
	})
}

// The fake store's JobDeleter, as dynamo's: marking is guarded on the job
// having ended; records go children first, counted against the budget;
// the job item goes last, with the idempotency records naming it.
func (f *jobRecords) JobMarkDeleting(_ context.Context, id, owner string, now time.Time) error {
	_, err := call(f.state, "JobMarkDeleting", func() (struct{}, error) {
		j, ok := f.jobs[id]
		if !ok {
			return struct{}{}, fmt.Errorf("mark job %s deleting: %w", id, domain.ErrNotFound)
		}
		if !sm.Jobs.IsTerminal(j.job.State) {
			return struct{}{}, fmt.Errorf("mark job %s deleting: %w", id, sm.ErrInvalidTransition)
		}
		if j.job.Deleting.IsZero() {
			j.job.Deleting = msTime(now)
		}
		return struct{}{}, nil
	})
	return err
}

func (f *jobRecords) JobDeleteRecords(_ context.Context, job string, budget int) (int, bool, error) {
	type res struct {
		n        int
		complete bool
	}
	r, err := call(f.state, "JobDeleteRecords", func() (res, error) {
		n := 0
		full := func() bool { return budget > 0 && n >= budget }
		for k := range f.counters {
			if k.job == job && !full() {
				delete(f.counters, k)
				n++
			}
		}
		for k := range f.tasks {
			if k.Job == job && !full() {
				delete(f.tasks, k)
				n++
			}
		}
		for k := range f.ends {
			if k.ref.Job == job && !full() {
				delete(f.ends, k)
				n++
			}
		}
		for k := range f.slots {
			if k == dynamo.JobSlots(job) && !full() {
				delete(f.slots, k)
				n++
			}
		}
		if full() {
			return res{n, false}, nil
		}
		for k := range f.stages {
			if k.job == job {
				delete(f.stages, k)
				n++
			}
		}
		return res{n, true}, nil
	})
	return r.n, r.complete, err
}

// PostponeExpiry moves the job's turn; the fake keeps no TTL.
func (f *jobRecords) JobPostponeExpiry(_ context.Context, job, _ string, until time.Time) error {
	return do(f.state, "JobPostponeExpiry", func() error {
		j, ok := f.jobs[job]
		if !ok || !sm.Jobs.IsTerminal(j.job.State) || !j.job.Deleting.IsZero() {
			return fmt.Errorf("postpone expiry of job %s: %w", job, sm.ErrInvalidTransition)
		}
		j.due = msTime(until)
		return nil
	})
}

func (f *jobRecords) JobDeleteItem(_ context.Context, job string) (int, error) {
	return call(f.state, "JobDeleteItem", func() (int, error) {
		n := 0
		for k, v := range f.idem {
			if v.job == job {
				delete(f.idem, k)
				n++
			}
		}
		if _, ok := f.jobs[job]; ok {
			delete(f.jobs, job)
			n++
		}
		return n, nil
	})
}

// JobStart: sm.ErrInvalidTransition unless the job is WAITING. The fake
// keeps no schedule index, so the start entry is not modelled.
func (f *jobRecords) JobStart(_ context.Context, p dynamo.JobStartParams) error {
	return do(f.state, "JobStart", func() error {
		j, ok := f.jobs[p.Job]
		if !ok {
			return fmt.Errorf("start job %s: %w", p.Job, domain.ErrNotFound)
		}
		if j.job.State != sm.JobWaiting {
			return fmt.Errorf("start job %s (%s): %w", p.Job, j.job.State, sm.ErrInvalidTransition)
		}
		j.job.State = sm.Jobs.Transition(sm.JobStart).To
		j.job.Updated, j.job.Started = msTime(p.Now), msTime(p.Now)
		for _, idx := range p.Roots {
			if st, ok := f.stages[stageKey{p.Job, idx}]; ok {
				st.due = msTime(p.StageDue)
			}
		}
		f.log.Add("job %s start", p.Job)
		return nil
	})
}
