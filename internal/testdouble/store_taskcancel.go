package testdouble

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// TaskCancel fails a READY or CLAIMED task as its owner's cancel and ends
// its claims, within its stage's allowance when p.Allowed is set (the
// task, its shard's count and the stage's count together, or nothing); a
// repeat answers the task as the first cancel left it, as the adapter's
// does.
func (f *taskRecords) TaskCancel(_ context.Context, p dynamo.TaskCancelParams) (domain.Task, error) {
	return call(f.state, "TaskCancel", func() (domain.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok && p.MaxAttempts > 0 {
			ft = &taskRow{t: domain.Task{Ref: p.Ref, State: sm.TaskUnwritten, MaxAttempts: p.MaxAttempts}}
		}
		if ft == nil {
			return domain.Task{}, fmt.Errorf("cancel task %s: %w", p.Ref, domain.ErrNotFound)
		}
		now := msTime(p.Now)
		if _, err := sm.Decide(ft.t.View(), sm.TaskOwnerCancel, sm.TaskInput{At: now}); err != nil {
			switch t := ft.t; {
			case t.State == sm.TaskFailed && t.ErrorClass == domain.ClassCancelled:
				return t, nil
			case t.State == sm.TaskSucceeded:
				return t, fmt.Errorf("cancel task %s: %w: %w", p.Ref, dynamo.ErrCommitted, domain.ErrAlreadyDone)
			}
			return ft.t, fmt.Errorf("cancel task %s: %w", p.Ref, err)
		}
		if p.Allowed > 0 {
			if err := f.tolerateOne(p.Ref, p.Allowed, p.Shards); err != nil {
				return domain.Task{}, err
			}
		}
		t := &ft.t
		t.State, t.LastError, t.ErrorClass, t.Updated = sm.TaskFailed, p.Err, domain.ClassCancelled, now
		t.Tolerated = p.Allowed > 0
		t.Token, t.LeaseUntil, t.NotBefore = "", time.Time{}, time.Time{}
		if t.Copy != nil {
			t.Copy.Token, t.Copy.LeaseUntil, t.Copy.Executor = "", time.Time{}, ""
		}
		ft.due = msTime(p.Due)
		f.tasks[p.Ref] = ft
		return *t, nil
	})
}

// tolerateOne counts a failed task of a RUNNING stage within allowed
// (sm.StageTolerate) and counts it down on its shard, or changes nothing.
func (f *taskRecords) tolerateOne(ref domain.TaskRef, allowed, shards int) error {
	st, ok := f.stages[stageKey{ref.Job, ref.Stage}]
	if !ok || st.st.State != sm.StageRunning || !sm.Tolerates(st.st.Tolerated, allowed) {
		return fmt.Errorf("cancel task %s: stage %d: %w", ref, ref.Stage, dynamo.ErrNotTolerated)
	}
	c, ok := f.counters[shardKey{ref.Job, ref.Stage, dynamo.ShardOf(ref.Partition, shards)}]
	if !ok {
		return fmt.Errorf("cancel task %s: %w", ref, errors.New("its completion counter is missing"))
	}
	st.st.Tolerated++
	c.left--
	return nil
}
