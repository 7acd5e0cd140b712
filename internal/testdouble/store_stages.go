package testdouble

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/batchwork/batchwork/shared/cost"
	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	sm "github.com/batchwork/batchwork/statemachine"
)

func (f *stageRecords) StageList(_ context.Context, job string) ([]domain.Stage, error) {
	return call(f.state, "StageList", func() ([]domain.Stage, error) {
		var out []domain.Stage
		for k, s := range f.stages {
			if k.job == job {
				out = append(out, s.st)
			}
		}
		sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
		return out, nil
	})
}

func (f *stageRecords) StageGet(_ context.Context, job string, idx int) (domain.Stage, error) {
	return call(f.state, "StageGet", func() (domain.Stage, error) {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok {
			return domain.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, domain.ErrNotFound)
		}
		return s.st, nil
	})
}

// TransitionStage: exactly one caller wins; the others get
// sm.ErrInvalidTransition, which also wraps domain.ErrJobNotRunning when
// the transition is guarded by sm.GuardJobRunning and the job has ended.
func (f *stageRecords) StageTransition(_ context.Context, p dynamo.StageTransitionParams) error {
	return do(f.state, "StageTransition", func() error {
		tr := sm.Stages.Transition(p.Event)
		if slices.Contains(tr.Guards, sm.GuardJobRunning) {
			if j, ok := f.jobs[p.Job]; !ok || j.job.State != sm.JobRunning {
				return fmt.Errorf("%s stage %s/%d: %w: %w", p.Event, p.Job, p.Stage, domain.ErrJobNotRunning, sm.ErrInvalidTransition)
			}
		}
		if p.Redrives != nil {
			if j, ok := f.jobs[p.Job]; !ok || len(j.job.Redrives) != *p.Redrives {
				return fmt.Errorf("%s stage %s/%d: the job was redriven since: %w", p.Event, p.Job, p.Stage, sm.ErrInvalidTransition)
			}
		}
		s, ok := f.stages[stageKey{p.Job, p.Stage}]
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
		f.log.Add("stage %s/%d %s", p.Job, p.Stage, p.Event)
		return nil
	})
}

// ChargeStagePlan: the fake counts no quota.
func (f *stageRecords) StageChargePlan(context.Context, dynamo.PlanChargeParams) error { return nil }

// SetStagePlan records the plan once; a second call keeps the first.
func (f *stageRecords) StageSetPlan(_ context.Context, job string, idx, total int) (domain.Stage, error) {
	return call(f.state, "StageSetPlan", func() (domain.Stage, error) {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok {
			return domain.Stage{}, fmt.Errorf("get stage %s/%d: %w", job, idx, domain.ErrNotFound)
		}
		if !s.planned {
			s.planned = true
			s.st.Total, s.st.Shards = total, dynamo.ShardCount(total)
		}
		return s.st, nil
	})
}

// MarkMaterialized: sm.ErrInvalidTransition unless the stage is RUNNING.
func (f *stageRecords) StageMarkMaterialized(_ context.Context, job string, idx int, due time.Time) error {
	return do(f.state, "StageMarkMaterialized", func() error {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok || s.st.State != sm.StageRunning {
			return fmt.Errorf("mark stage %s/%d materialized: %w", job, idx, sm.ErrInvalidTransition)
		}
		s.st.Materialized = true
		if s.st.SegmentTasks > 0 {
			s.st.Enqueued = max(s.st.Enqueued, s.st.Total) // as the store reads it back
		}
		s.due = msTime(due)
		return nil
	})
}

// AdvanceEnqueued moves the count from from to to, and says whether it
// did: a stale from is not an error.
func (f *stageRecords) StageAdvanceEnqueued(_ context.Context, job string, idx, from, to int, due time.Time) (bool, error) {
	return call(f.state, "StageAdvanceEnqueued", func() (bool, error) {
		s, ok := f.stages[stageKey{job, idx}]
		if !ok || s.st.Enqueued != from {
			return false, nil
		}
		s.st.Enqueued = to
		s.due = msTime(due)
		return true, nil
	})
}

func (f *stageRecords) StageHurry(_ context.Context, job string, stage int, due time.Time) error {
	return do(f.state, "StageHurry", func() error {
		due = msTime(due)
		if s, ok := f.stages[stageKey{job, stage}]; ok && s.st.State == sm.StageRunning && (s.due.IsZero() || s.due.After(due)) {
			s.due = due
		}
		return nil
	})
}

func (f *stageRecords) StageProgress(_ context.Context, st domain.Stage) (domain.Progress, error) {
	return call(f.state, "StageProgress", func() (domain.Progress, error) {
		p := domain.Progress{Total: st.Total}
		for k := 0; k < st.Shards; k++ {
			c, ok := f.counters[shardKey{st.Job, st.Index, k}]
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

func (f *stageRecords) StageStats(context.Context, string) ([]domain.StageStats, error) {
	panic("testdouble.Store: StageStats is not faked (read-side routes are out of these tests' scope)")
}

// StageDurations: the fake keeps no duration histograms.
func (f *stageRecords) StageDurations(context.Context, string, int, int) (domain.Durations, error) {
	return domain.Durations{}, errUnsupported("StageDurations")
}

func (f *stageRecords) StagePutRateSample(context.Context, string, int, time.Time, domain.RateSample) (bool, error) {
	panic("testdouble.Store: PutRateSample is not faked (read-side routes are out of these tests' scope)")
}

// SetCopiesRunning records the count on a RUNNING stage; nothing on any
// other, as the adapter's conditional update.
func (f *stageRecords) StageSetCopiesRunning(_ context.Context, job string, idx, n int) error {
	return do(f.state, "StageSetCopiesRunning", func() error {
		if s, ok := f.stages[stageKey{job, idx}]; ok && s.st.State == sm.StageRunning {
			s.st.CopiesRunning = n
		}
		return nil
	})
}

// BadRecordCounts: the fake's commits count no bad records.
func (f *stageRecords) StageBadRecordCounts(context.Context, string) (map[int]int64, error) {
	return nil, errUnsupported("StageBadRecordCounts")
}

// PutShards creates the counters that do not exist, each starting at the
// number of tasks that count it down.
func (f *stageRecords) ShardPut(_ context.Context, job string, idx, total, shards int) error {
	return do(f.state, "ShardPut", func() error {
		for k, n := range dynamo.ShardSizes(total, shards) {
			key := shardKey{job, idx, k}
			if _, ok := f.counters[key]; ok {
				continue
			}
			f.counters[key] = &counter{left: n}
		}
		return nil
	})
}

func (f *stageRecords) ShardLeft(_ context.Context, job string, idx, shard int) (int, error) {
	return call(f.state, "ShardLeft", func() (int, error) {
		c, ok := f.counters[shardKey{job, idx, shard}]
		if !ok {
			return 0, fmt.Errorf("read counter %d of stage %s/%d: %w", shard, job, idx, domain.ErrNotFound)
		}
		return c.left, nil
	})
}

// ShardEmptied says every shard is empty: the fake's completion checks
// read the counters each time, as before the set.
func (f *stageRecords) ShardEmptied(context.Context, string, int, int) (bool, error) {
	return true, nil
}

// ShardAddCost keeps nothing: the fake's counters do not carry costs.
func (f *stageRecords) ShardAddCost(context.Context, string, int, int, string, cost.Counts) error {
	return nil
}

// EnsureCounted finds every committed task counted: the fake's commit
// counts in the same step.
func (f *stageRecords) ShardEnsureCounted(context.Context, domain.TaskRef, int) (bool, bool, error) {
	return false, false, nil
}

// CountCommits is not used: the fake's services count as they commit.
func (f *stageRecords) ShardCountCommits(context.Context, []dynamo.CommitParams) ([]dynamo.ShardRef, error) {
	return nil, errors.New("testdouble.Store: no batched counts")
}
