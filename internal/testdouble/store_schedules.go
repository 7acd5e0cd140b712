package testdouble

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/domain"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
)

func (f *scheduleRecords) ScheduleCreate(context.Context, schedule.Schedule, time.Time, int) error {
	return errUnsupported("ScheduleCreate")
}

func (f *scheduleRecords) ScheduleGet(_ context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	return dynamo.ScheduleRecord{}, fmt.Errorf("schedule %s: %w", id, domain.ErrNotFound)
}

func (f *scheduleRecords) ScheduleList(context.Context, string, string, int) ([]dynamo.ScheduleRecord, string, error) {
	return nil, "", nil
}

func (f *scheduleRecords) ScheduleSetPaused(_ context.Context, _, id string, _ bool, _ time.Time) (bool, error) {
	return false, fmt.Errorf("schedule %s: %w", id, domain.ErrNotFound)
}

func (f *scheduleRecords) ScheduleDelete(_ context.Context, _, id string) error {
	return fmt.Errorf("schedule %s: %w", id, domain.ErrNotFound)
}

func (f *scheduleRecords) ScheduleAdvanceCursor(context.Context, string, string, time.Time, time.Time, string, time.Time, dynamo.IndexEntry, []dynamo.Run, time.Time) error {
	return errUnsupported("ScheduleAdvanceCursor")
}

func (f *scheduleRecords) ScheduleDueEntries(context.Context, schedule.Bucket, int) ([]dynamo.IndexEntry, error) {
	return nil, nil
}

func (f *scheduleRecords) ScheduleMoveEntry(context.Context, dynamo.IndexEntry, time.Time, time.Time) error {
	return errUnsupported("ScheduleMoveEntry")
}

func (f *scheduleRecords) ScheduleWatermark(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

func (f *scheduleRecords) ScheduleAdvanceWatermark(context.Context, time.Time, time.Time) error {
	return errUnsupported("ScheduleAdvanceWatermark")
}

func (f *scheduleRecords) SchedulePutRun(context.Context, string, dynamo.Run) error {
	return errUnsupported("SchedulePutRun")
}

func (f *scheduleRecords) ScheduleRuns(context.Context, string, time.Time, int) ([]dynamo.Run, error) {
	return nil, nil
}

func (f *scheduleRecords) CatalogAddTaskNames(_ context.Context, names []string) error {
	return do(f.state, "CatalogAddTaskNames", func() error {
		f.taskNames = addNames(f.taskNames, names)
		return nil
	})
}

func (f *scheduleRecords) CatalogTaskNames(context.Context) ([]string, error) {
	return call(f.state, "CatalogTaskNames", func() ([]string, error) { return slices.Clone(f.taskNames), nil })
}

func (f *scheduleRecords) CatalogAddPrograms(_ context.Context, names []string) error {
	return do(f.state, "CatalogAddPrograms", func() error {
		f.programs = addNames(f.programs, names)
		return nil
	})
}

func (f *scheduleRecords) CatalogPrograms(context.Context) ([]string, error) {
	return call(f.state, "CatalogPrograms", func() ([]string, error) { return slices.Clone(f.programs), nil })
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

func (f *scheduleRecords) ScheduleShardTake(context.Context, int, string, time.Time, time.Time) (schedule.ShardLease, error) {
	return schedule.ShardLease{}, errUnsupported("ScheduleShardTake")
}

func (f *scheduleRecords) ScheduleShardAdvance(context.Context, int, string, time.Time, time.Time, time.Time) error {
	return errUnsupported("ScheduleShardAdvance")
}

func (f *scheduleRecords) ScheduleShardRelease(context.Context, int, string) error {
	return errUnsupported("ScheduleShardRelease")
}

func (f *scheduleRecords) ScheduleShards(context.Context) ([]schedule.ShardLease, error) {
	return nil, nil
}
