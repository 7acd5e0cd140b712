package testdouble

import (
	"context"
	"sort"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
)

// RecordAttemptEnd records an attempt's end once: a repeat reports false.
func (f *attemptRecords) AttemptRecordEnd(_ context.Context, p dynamo.AttemptEndParams) (bool, error) {
	return call(f.state, "AttemptRecordEnd", func() (bool, error) {
		k := attemptKey{p.End.Ref, p.End.Attempt}
		if _, ok := f.ends[k]; ok {
			return false, nil
		}
		f.ends[k] = p.End
		if p.Shards > 0 {
			if c, ok := f.counters[shardKey{p.End.Ref.Job, p.End.Ref.Stage, dynamo.ShardOf(p.End.Ref.Partition, p.Shards)}]; ok {
				c.failures++
			}
		}
		return true, nil
	})
}

// AttemptEnds returns the recorded ends of partitions from..to of a
// stage, by partition then attempt.
func (f *attemptRecords) AttemptEnds(_ context.Context, job string, stage, from, to int) ([]domain.AttemptEnd, error) {
	return call(f.state, "AttemptEnds", func() ([]domain.AttemptEnd, error) {
		var out []domain.AttemptEnd
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

// TimelineRecord keeps the task events in the order written
// (TimelineEvents is not faked: tests read them here).
func (f *attemptRecords) TimelineRecord(_ context.Context, e domain.AttemptEnd) error {
	return do(f.state, "TimelineRecord", func() error {
		f.timeline = append(f.timeline, e)
		return nil
	})
}

func (f *attemptRecords) TimelineEvents(context.Context, string, string, int) ([]dynamo.TimelineEvent, error) {
	panic("testdouble.Store: JobEvents is not faked (read-side routes are out of these tests' scope)")
}

// RenewExecutor records that executor id lives until until; a promise is
// never moved back.
func (f *attemptRecords) ExecutorRenew(_ context.Context, id string, until time.Time) error {
	return do(f.state, "ExecutorRenew", func() error {
		if cur, ok := f.alive[id]; !ok || !cur.After(msTime(until)) {
			f.alive[id] = msTime(until)
		}
		return nil
	})
}

// ExecutorAlive reads until when id promised to live; zero without a
// record.
func (f *attemptRecords) ExecutorAlive(_ context.Context, id string) (time.Time, error) {
	return call(f.state, "ExecutorAlive", func() (time.Time, error) { return f.alive[id], nil })
}

// RenewExecutorMemory is RenewExecutor with the memory report, in the same
// write: a report with an older promise is dropped with it.
func (f *attemptRecords) ExecutorRenewMemory(_ context.Context, id string, until time.Time, usedMiB, limitMiB int64) error {
	return do(f.state, "ExecutorRenewMemory", func() error {
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
func (f *attemptRecords) ExecutorMarkKilled(_ context.Context, id, reason string, _ time.Time) error {
	return do(f.state, "ExecutorMarkKilled", func() error {
		m := f.mem[id]
		m.Killed = reason
		f.mem[id] = m
		return nil
	})
}

// ReadExecutorMemory: the zero record for an executor never seen.
func (f *attemptRecords) ExecutorMemory(_ context.Context, id string) (dynamo.ExecutorMemory, error) {
	return call(f.state, "ExecutorMemory", func() (dynamo.ExecutorMemory, error) {
		m := f.mem[id]
		m.Alive = f.alive[id]
		return m, nil
	})
}
