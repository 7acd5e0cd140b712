package testdouble

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/batchwork/batchwork/shared/batch"
	"github.com/batchwork/batchwork/shared/dynamo"
	"github.com/batchwork/batchwork/shared/schedule"
)

func (f *scheduleRecords) CreateSchedule(context.Context, schedule.Schedule, time.Time, int) error {
	return errUnsupported("CreateSchedule")
}

func (f *scheduleRecords) GetSchedule(_ context.Context, owner, id string) (dynamo.ScheduleRecord, error) {
	return dynamo.ScheduleRecord{}, fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *scheduleRecords) ListSchedules(context.Context, string, string, int) ([]dynamo.ScheduleRecord, string, error) {
	return nil, "", nil
}

func (f *scheduleRecords) SetPaused(_ context.Context, _, id string, _ bool, _ time.Time) (bool, error) {
	return false, fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *scheduleRecords) DeleteSchedule(_ context.Context, _, id string) error {
	return fmt.Errorf("schedule %s: %w", id, batch.ErrNotFound)
}

func (f *scheduleRecords) AdvanceCursor(context.Context, string, string, time.Time, time.Time, string, time.Time, dynamo.IndexEntry, time.Time) error {
	return errUnsupported("AdvanceCursor")
}

func (f *scheduleRecords) DueEntries(context.Context, schedule.Bucket, int) ([]dynamo.IndexEntry, error) {
	return nil, nil
}

func (f *scheduleRecords) MoveEntry(context.Context, dynamo.IndexEntry, time.Time, time.Time) error {
	return errUnsupported("MoveEntry")
}

func (f *scheduleRecords) Watermark(context.Context) (time.Time, bool, error) {
	return time.Time{}, false, nil
}

func (f *scheduleRecords) AdvanceWatermark(context.Context, time.Time, time.Time) error {
	return errUnsupported("AdvanceWatermark")
}

func (f *scheduleRecords) PutRun(context.Context, string, dynamo.Run) error {
	return errUnsupported("PutRun")
}

func (f *scheduleRecords) Runs(context.Context, string, time.Time, int) ([]dynamo.Run, error) {
	return nil, nil
}

func (f *scheduleRecords) AddTaskNames(_ context.Context, names []string) error {
	return do(f.state, "AddTaskNames", func() error {
		f.taskNames = addNames(f.taskNames, names)
		return nil
	})
}

func (f *scheduleRecords) TaskNames(context.Context) ([]string, error) {
	return call(f.state, "TaskNames", func() ([]string, error) { return slices.Clone(f.taskNames), nil })
}

func (f *scheduleRecords) AddPrograms(_ context.Context, names []string) error {
	return do(f.state, "AddPrograms", func() error {
		f.programs = addNames(f.programs, names)
		return nil
	})
}

func (f *scheduleRecords) Programs(context.Context) ([]string, error) {
	return call(f.state, "Programs", func() ([]string, error) { return slices.Clone(f.programs), nil })
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
