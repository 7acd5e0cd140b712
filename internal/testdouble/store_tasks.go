package testdouble

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

// PutTasks creates the tasks that do not exist; an existing one (claimed,
// committed) is never reset. Only the fields the adapter writes are kept.
func (f *taskRecords) TaskPutMany(_ context.Context, tasks []domain.Task, due time.Time) error {
	return do(f.state, "TaskPutMany", func() error {
		for _, t := range tasks {
			if _, ok := f.tasks[t.Ref]; ok {
				continue
			}
			f.tasks[t.Ref] = &taskRow{t: domain.Task{
				Ref: t.Ref, State: t.State, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
				Input: t.Input, Updated: msTime(t.Updated),
			}, due: msTime(due)}
		}
		return nil
	})
}

func (f *taskRecords) TaskGet(_ context.Context, ref domain.TaskRef) (domain.Task, error) {
	return call(f.state, "TaskGet", func() (domain.Task, error) {
		t, ok := f.tasks[ref]
		if !ok {
			return domain.Task{}, fmt.Errorf("get task %s: %w", ref, domain.ErrNotFound)
		}
		return t.t, nil
	})
}

// ListStageTasks lists a stage's tasks bucket by bucket, as the adapter's
// Queries do: every task in the buckets that total spans, by partition.
func (f *taskRecords) TaskListStage(_ context.Context, job string, stage, total int) ([]domain.Task, error) {
	return call(f.state, "TaskListStage", func() ([]domain.Task, error) {
		limit := (total + dynamo.TaskBucket - 1) / dynamo.TaskBucket * dynamo.TaskBucket
		out := make([]domain.Task, 0, total)
		for ref, t := range f.tasks {
			if ref.Job == job && ref.Stage == stage && ref.Partition < limit {
				out = append(out, t.t)
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Ref.Partition < out[b].Ref.Partition })
		return out, nil
	})
}

// ListTaskPage reads a stage's tasks after p.After bucket by bucket, as
// the adapter's Queries do: each read evaluates at most the rows the page
// still wants (before the state filter, like a Query's Limit) and stops at
// its bucket's end.
func (f *taskRecords) TaskListPage(_ context.Context, p dynamo.TaskPageParams) (dynamo.TaskPage, error) {
	return call(f.state, "TaskListPage", func() (dynamo.TaskPage, error) {
		pg := dynamo.TaskPage{Next: p.After}
		for pg.Next+1 < p.Total && len(pg.Rows) < p.Limit && pg.Reads < max(p.MaxReads, 1) {
			b := (pg.Next + 1) / dynamo.TaskBucket
			pg.Reads++
			var bucket []domain.Task
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
					pg.Rows = append(pg.Rows, domain.TaskRow{Task: t})
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

// ClaimTask claims a READY task whose backoff has passed, or takes over a
// CLAIMED one whose lease expired with attempts left. Otherwise it
// returns the task with *domain.ClaimHeldError, *domain.NotDueError,
// domain.ErrAlreadyDone, or sm.ErrInvalidTransition (an expired claim
// with no attempts left).
func (f *taskRecords) TaskClaim(_ context.Context, p dynamo.ClaimParams) (domain.Task, error) {
	return call(f.state, "TaskClaim", func() (domain.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return domain.Task{}, fmt.Errorf("claim task %s: get task %s: %w", p.Ref, p.Ref, domain.ErrNotFound)
		}
		now := msTime(p.Now)
		in := sm.TaskInput{At: now}
		_, cerr := sm.Decide(ft.t.View(), sm.TaskClaim, in)
		_, rerr := sm.Decide(ft.t.View(), sm.TaskReclaim, in)
		if cerr != nil && rerr != nil {
			if ft.t.State == sm.TaskClaimed && ft.t.Token == p.Token {
				return ft.t, nil // our own claim, retried
			}
			return ft.t, explainClaim(ft.t, now)
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
		if t.TraceSpan == "" {
			t.TraceSpan = p.TraceSpan // the record's own is kept
		}
		ft.due = msTime(t.LeaseUntil.Add(p.Grace))
		return *t, nil
	})
}

// ForgetClaim deletes the task's record while the claim with token holds
// it; a record that moved on is left alone.
func (f *taskRecords) TaskForgetClaim(_ context.Context, ref domain.TaskRef, token string) error {
	return do(f.state, "TaskForgetClaim", func() error {
		if ft, ok := f.tasks[ref]; ok && ft.t.State == sm.TaskClaimed && ft.t.Token == token {
			delete(f.tasks, ref)
		}
		return nil
	})
}

// Heartbeat extends the holder's lease; domain.ErrStaleClaim otherwise.
func (f *taskRecords) TaskHeartbeat(_ context.Context, p dynamo.HolderParams, lease, grace time.Duration) error {
	return do(f.state, "TaskHeartbeat", func() error {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return fmt.Errorf("heartbeat task %s: %w", p.Ref, domain.ErrStaleClaim)
		}
		now := msTime(p.Now)
		if _, err := sm.Decide(ft.t.View(), sm.TaskHeartbeat, sm.TaskInput{At: now, Token: p.Token}); err != nil {
			return fmt.Errorf("heartbeat task %s (%v): %w", p.Ref, err, domain.ErrStaleClaim)
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
// any other refusal is domain.ErrStaleClaim or domain.ErrAlreadyDone.
func (f *taskRecords) TaskCommit(_ context.Context, p dynamo.CommitParams) (bool, error) {
	return call(f.state, "TaskCommit", func() (bool, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return false, fmt.Errorf("commit task %s: get task %s: %w", p.Ref, p.Ref, domain.ErrNotFound)
		}
		shard := shardKey{p.Ref.Job, p.Ref.Stage, dynamo.ShardOf(p.Ref.Partition, p.Shards)}
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
				return false, fmt.Errorf("read counter %d of stage %s/%d: %w", shard.shard, p.Ref.Job, p.Ref.Stage, domain.ErrNotFound)
			}
			return c.left == 0, nil
		case sm.Tasks.IsTerminal(t.State):
			return false, fmt.Errorf("commit task %s attempt %d: task is %s: %w", p.Ref, p.Attempt, t.State, domain.ErrAlreadyDone)
		case t.Token != p.Token:
			return false, fmt.Errorf("commit task %s attempt %d: current attempt is %d: %w", p.Ref, p.Attempt, t.Attempt, domain.ErrStaleClaim)
		}
		return false, fmt.Errorf("commit task %s: transaction cancelled: task %s attempt %d", p.Ref, t.State, t.Attempt)
	})
}

// ReleaseTask applies the holder's retry or fail; domain.ErrStaleClaim if
// the rules refuse it.
func (f *taskRecords) TaskRelease(_ context.Context, p dynamo.ReleaseParams) (domain.Task, error) {
	return call(f.state, "TaskRelease", func() (domain.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok {
			return domain.Task{}, fmt.Errorf("%s task %s: %w", p.Event, p.Ref, domain.ErrStaleClaim)
		}
		now := msTime(p.Now)
		tr, err := sm.Decide(ft.t.View(), p.Event, sm.TaskInput{At: now, Token: p.Token})
		if err != nil {
			return domain.Task{}, fmt.Errorf("%s task %s (%v): %w", p.Event, p.Ref, err, domain.ErrStaleClaim)
		}
		t := &ft.t
		t.State, t.LastError, t.Updated = tr.To, p.Err, now
		if p.Class != domain.ClassNone {
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

func (f *taskRecords) TaskFailTolerated(context.Context, dynamo.TolerateParams) (domain.Task, error) {
	return domain.Task{}, errUnsupported("TaskFailTolerated")
}

// SweepTask applies a non-holder event; sm.ErrInvalidTransition means the
// task moved on.
func (f *taskRecords) TaskSweep(_ context.Context, p dynamo.SweepTaskParams) error {
	return do(f.state, "TaskSweep", func() error {
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

// TakeoverTask applies a takeover if the holder's claim is still the
// task's and the rules, given the holder's liveness record, allow it;
// sm.ErrInvalidTransition otherwise.
func (f *taskRecords) TaskTakeover(_ context.Context, p dynamo.TakeoverParams) (domain.Task, error) {
	return call(f.state, "TaskTakeover", func() (domain.Task, error) {
		ft, ok := f.tasks[p.Ref]
		if !ok || ft.t.Token != p.Holder.Token {
			return domain.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, sm.ErrInvalidTransition)
		}
		now := msTime(p.Now)
		view := ft.t.View()
		view.HolderAlive = f.alive[p.Holder.Executor]
		tr, err := sm.Decide(view, sm.TaskTakeover, sm.TaskInput{At: now})
		if err != nil {
			return domain.Task{}, fmt.Errorf("take over task %s: %w", p.Ref, err)
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

func (f *taskRecords) TaskLoseForMemory(context.Context, dynamo.LostForMemoryParams) (domain.Task, error) {
	return domain.Task{}, errUnsupported("TaskLoseForMemory")
}

// UnindexTask takes a task out of the index unless it changed since t
// was read (state or update time).
func (f *taskRecords) TaskUnindex(_ context.Context, t domain.Task) error {
	return do(f.state, "TaskUnindex", func() error {
		if ft, ok := f.tasks[t.Ref]; ok && ft.t.State == t.State && ft.t.Updated.Equal(msTime(t.Updated)) {
			ft.due = time.Time{}
		}
		return nil
	})
}

func (f *taskRecords) TaskCheckpoint(context.Context, dynamo.CheckpointParams) error {
	return errUnsupported("TaskCheckpoint")
}

func (f *taskRecords) TaskContinue(context.Context, dynamo.ContinueParams) (domain.Task, error) {
	return domain.Task{}, errUnsupported("TaskContinue")
}

func (f *taskRecords) TaskSplit(context.Context, dynamo.SplitTaskParams) (int, error) {
	return 0, errUnsupported("TaskSplit")
}

func (f *taskRecords) CopyRequest(context.Context, domain.TaskRef, time.Time) error {
	return errUnsupported("CopyRequest")
}

func (f *taskRecords) CopyClaim(context.Context, dynamo.ClaimParams) (domain.Task, error) {
	return domain.Task{}, errUnsupported("CopyClaim")
}

func (f *taskRecords) CopyHeartbeat(context.Context, dynamo.HolderParams, time.Duration, time.Duration) error {
	return errUnsupported("CopyHeartbeat")
}

func (f *taskRecords) TaskDropClaim(context.Context, dynamo.DropParams) (domain.Task, error) {
	return domain.Task{}, errUnsupported("TaskDropClaim")
}

// explainClaim is the adapter's explainClaim: the refusal's outcome,
// from the same rules.
func explainClaim(t domain.Task, now time.Time) error {
	if sm.Tasks.IsTerminal(t.State) {
		return fmt.Errorf("claim task %s (%s): %w", t.Ref, t.State, domain.ErrAlreadyDone)
	}
	if t.State == sm.TaskReady {
		return &domain.NotDueError{At: t.NotBefore}
	}
	_, err := sm.Decide(t.View(), sm.TaskReclaim, sm.TaskInput{At: now})
	var ge *sm.GuardError
	if errors.As(err, &ge) && ge.Guard == sm.GuardLeaseExpired {
		return &domain.ClaimHeldError{LeaseUntil: t.LeaseUntil.Add(sm.LeaseSkew)}
	}
	if errors.As(err, &ge) && ge.Guard == sm.GuardAttemptsLeft {
		return fmt.Errorf("claim task %s: lease expired on attempt %d of %d: %w", t.Ref, t.Attempt, t.MaxAttempts, sm.ErrInvalidTransition)
	}
	return &domain.ClaimHeldError{LeaseUntil: now.Add(time.Second)}
}
