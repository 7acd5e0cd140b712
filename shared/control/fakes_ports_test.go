package control

// The rest of the fake store's port: what it models as dynamo.Store does,
// and, for what it does not model, an error naming the method. A unit
// test that reaches one of those fails on it; it never runs on as if the
// feature were absent.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/events"
	"github.com/batchwork/batchwork/shared/schedule"
	sm "github.com/batchwork/batchwork/statemachine"
)

// errFakeUnsupported is a port method the fake store does not model.
func errFakeUnsupported(method string) error {
	return fmt.Errorf("fake: %s not supported", method)
}

// ---- jobs ----

func (f *fakeStore) IdempotentJob(_ context.Context, owner, idemKey string) (string, bool, error) {
	type res struct {
		id    string
		found bool
	}
	r, err := fakeCall(f, "IdempotentJob", func() (res, error) {
		prev, ok := f.idem[owner+"#"+idemKey]
		return res{prev.job, ok}, nil
	})
	return r.id, r.found, err
}

// EndJobEvent is EndJob naming the ended event of the job's redrive
// generation (events.JobEndedID), as the adapter's outbox does.
func (f *fakeStore) EndJobEvent(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time) (string, error) {
	return f.EndJobGen(ctx, id, ev, reason, manifest, now, -1)
}

// EndJobGen: sm.ErrInvalidTransition when the job was redriven since gen
// (gen >= 0) or already ended.
func (f *fakeStore) EndJobGen(ctx context.Context, id string, ev sm.Event, reason, manifest string, now time.Time, gen int) (string, error) {
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

func (f *fakeStore) RedriveCount(_ context.Context, id string) (int, error) {
	return fakeCall(f, "RedriveCount", func() (int, error) {
		j, ok := f.jobs[id]
		if !ok {
			return 0, fmt.Errorf("read job %s: %w", id, batch.ErrNotFound)
		}
		return len(j.job.Redrives), nil
	})
}

// QuotaUse: the fake counts no quotas.
func (f *fakeStore) QuotaUse(context.Context, string) (dynamo.QuotaUse, error) {
	return dynamo.QuotaUse{}, errFakeUnsupported("QuotaUse")
}

// ---- redrives and reruns ----

func (f *fakeStore) RedriveJob(context.Context, dynamo.RedriveJobParams) error {
	return errFakeUnsupported("RedriveJob")
}

func (f *fakeStore) RedriveStage(context.Context, string, int, sm.Event, time.Time, time.Time) error {
	return errFakeUnsupported("RedriveStage")
}

func (f *fakeStore) RedriveTask(context.Context, batch.TaskRef, int, int, time.Time, time.Time, time.Time) error {
	return errFakeUnsupported("RedriveTask")
}

func (f *fakeStore) RaiseAttempts(context.Context, batch.TaskRef, int, int) error {
	return errFakeUnsupported("RaiseAttempts")
}

func (f *fakeStore) MarkTaskRedrive(context.Context, batch.TaskRef, int) error {
	return errFakeUnsupported("MarkTaskRedrive")
}

func (f *fakeStore) AdoptStage(context.Context, string, int, int) error {
	return errFakeUnsupported("AdoptStage")
}

func (f *fakeStore) AdoptTolerated(context.Context, string, int, int) error {
	return errFakeUnsupported("AdoptTolerated")
}

// ---- stages ----

// StageDurations: the fake keeps no duration histograms.
func (f *fakeStore) StageDurations(context.Context, string, int, int) (batch.Durations, error) {
	return batch.Durations{}, errFakeUnsupported("StageDurations")
}

// SetCopiesRunning records the count on a RUNNING stage; nothing on any
// other, as the adapter's conditional update.
func (f *fakeStore) SetCopiesRunning(_ context.Context, job string, idx, n int) error {
	return fakeDo(f, "SetCopiesRunning", func() error {
		if s, ok := f.stages[fakeStageKey{job, idx}]; ok && s.st.State == sm.StageRunning {
			s.st.CopiesRunning = n
		}
		return nil
	})
}

// BadRecordCounts: the fake's commits count no bad records.
func (f *fakeStore) BadRecordCounts(context.Context, string) (map[int]int64, error) {
	return nil, errFakeUnsupported("BadRecordCounts")
}

// ---- tasks ----

// ForgetClaim deletes the task's record while the claim with token holds
// it; a record that moved on is left alone.
func (f *fakeStore) ForgetClaim(_ context.Context, ref batch.TaskRef, token string) error {
	return fakeDo(f, "ForgetClaim", func() error {
		if ft, ok := f.tasks[ref]; ok && ft.t.State == sm.TaskClaimed && ft.t.Token == token {
			delete(f.tasks, ref)
		}
		return nil
	})
}

func (f *fakeStore) FailTolerated(context.Context, dynamo.TolerateParams) (batch.Task, error) {
	return batch.Task{}, errFakeUnsupported("FailTolerated")
}

func (f *fakeStore) LoseTaskForMemory(context.Context, dynamo.LostForMemoryParams) (batch.Task, error) {
	return batch.Task{}, errFakeUnsupported("LoseTaskForMemory")
}

func (f *fakeStore) CheckpointTask(context.Context, dynamo.CheckpointParams) error {
	return errFakeUnsupported("CheckpointTask")
}

func (f *fakeStore) ContinueTask(context.Context, dynamo.ContinueParams) (batch.Task, error) {
	return batch.Task{}, errFakeUnsupported("ContinueTask")
}

func (f *fakeStore) SplitTask(context.Context, dynamo.SplitTaskParams) (int, error) {
	return 0, errFakeUnsupported("SplitTask")
}

// ---- speculative copies ----

func (f *fakeStore) RequestCopy(context.Context, batch.TaskRef, time.Time) error {
	return errFakeUnsupported("RequestCopy")
}

func (f *fakeStore) ClaimCopy(context.Context, dynamo.ClaimParams) (batch.Task, error) {
	return batch.Task{}, errFakeUnsupported("ClaimCopy")
}

func (f *fakeStore) CopyHeartbeat(context.Context, dynamo.HolderParams, time.Duration, time.Duration) error {
	return errFakeUnsupported("CopyHeartbeat")
}

func (f *fakeStore) DropClaim(context.Context, dynamo.DropParams) (batch.Task, error) {
	return batch.Task{}, errFakeUnsupported("DropClaim")
}

// ---- timeline ----

// RecordTimelineEvent and RecordSpeculationEvent keep the task events in
// the order written (JobEvents is not faked: tests read them here).
func (f *fakeStore) RecordTimelineEvent(_ context.Context, e batch.AttemptEnd) error {
	return fakeDo(f, "RecordTimelineEvent", func() error {
		f.timeline = append(f.timeline, e)
		return nil
	})
}

func (f *fakeStore) RecordSpeculationEvent(_ context.Context, e batch.AttemptEnd) error {
	return fakeDo(f, "RecordSpeculationEvent", func() error {
		f.timeline = append(f.timeline, e)
		return nil
	})
}

// ---- executors ----

// RenewExecutorMemory is RenewExecutor with the memory report, in the same
// write: a report with an older promise is dropped with it.
func (f *fakeStore) RenewExecutorMemory(_ context.Context, id string, until time.Time, usedMiB, limitMiB int64) error {
	return fakeDo(f, "RenewExecutorMemory", func() error {
		if cur, ok := f.alive[id]; ok && cur.After(msTime(until)) {
			return nil
		}
		f.alive[id] = msTime(until)
		m := f.mem[id]
		m.UsedMiB, m.LimitMiB = usedMiB, limitMiB
		f.mem[id] = m
		return nil
	})
}

// MarkExecutorKilled marks the record, never reviving the executor.
func (f *fakeStore) MarkExecutorKilled(_ context.Context, id, reason string, _ time.Time) error {
	return fakeDo(f, "MarkExecutorKilled", func() error {
		m := f.mem[id]
		m.Killed = reason
		f.mem[id] = m
		return nil
	})
}

// ReadExecutorMemory: the zero record for an executor never seen.
func (f *fakeStore) ReadExecutorMemory(_ context.Context, id string) (dynamo.ExecutorMemory, error) {
	return fakeCall(f, "ReadExecutorMemory", func() (dynamo.ExecutorMemory, error) {
		m := f.mem[id]
		m.Alive = f.alive[id]
		return m, nil
	})
}

// ---- schedules ----
//
// The fake keeps no schedules: it is a store on which none was ever
// created (no watermark, nothing due), and creating one is unsupported.

func (f *fakeStore) CreateSchedule(context.Context, schedule.Schedule, time.Time, int) error {
	return errFakeUnsupported("CreateSchedule")
}

func (f *fakeStore) GetSchedule(_ context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	return dynamo.ScheduleRecord{}, fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *fakeStore) ListSchedules(context.Context, string, string, int) ([]dynamo.ScheduleRecord, string, error) {
	return nil, "", nil
}

func (f *fakeStore) SetPaused(_ context.Context, _, id string, _ bool, _ time.Time) (bool, error) {
	return false, fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *fakeStore) DeleteSchedule(_ context.Context, _, id string) error {
	return fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *fakeStore) AdvanceCursor(context.Context, string, string, time.Time, time.Time, string, time.Time, dynamo.IndexEntry, time.Time) error {
	return errFakeUnsupported("AdvanceCursor")
}

func (f *fakeStore) DueEntries(context.Context, schedule.Bucket, int) ([]dynamo.IndexEntry, error) {
	return nil, nil
}

func (f *fakeStore) MoveEntry(context.Context, dynamo.IndexEntry, time.Time, time.Time) error {
	return errFakeUnsupported("MoveEntry")
}

func (f *fakeStore) Watermark(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

func (f *fakeStore) AdvanceWatermark(context.Context, time.Time, time.Time) error {
	return errFakeUnsupported("AdvanceWatermark")
}

func (f *fakeStore) PutRun(context.Context, string, dynamo.Run) error {
	return errFakeUnsupported("PutRun")
}

func (f *fakeStore) Runs(context.Context, string, time.Time, int) ([]dynamo.Run, error) {
	return nil, nil
}

// ---- catalog ----

func (f *fakeStore) AddTaskNames(_ context.Context, names []string) error {
	return fakeDo(f, "AddTaskNames", func() error {
		f.taskNames = addNames(f.taskNames, names)
		return nil
	})
}

func (f *fakeStore) TaskNames(context.Context) ([]string, error) {
	return fakeCall(f, "TaskNames", func() ([]string, error) { return slices.Clone(f.taskNames), nil })
}

func (f *fakeStore) AddPrograms(_ context.Context, names []string) error {
	return fakeDo(f, "AddPrograms", func() error {
		f.programs = addNames(f.programs, names)
		return nil
	})
}

func (f *fakeStore) Programs(context.Context) ([]string, error) {
	return fakeCall(f, "Programs", func() ([]string, error) { return slices.Clone(f.programs), nil })
}

// addNames is a catalog's union: names are never withdrawn.
func addNames(have, names []string) []string {
	for _, n := range names {
		if !slices.Contains(have, n) {
			have = append(have, n)
		}
	}
	return have
}
