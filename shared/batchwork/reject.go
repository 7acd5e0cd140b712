package batchwork

import (
	"io"

	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/shared/domain"
)

// BadRecord is one record a task rejected, as `batchwork result ID
// --bad-records` shows it: its stage, partition and attempt, where it
// starts in the task's input (Offset; -1 if unknown), the record (cut to
// MaxBadRecordBytes with a marker saying how long it was) and the reason.
type BadRecord = domain.BadRecord

// Bounds on one attempt's rejected records (see Reject).
const (
	MaxBadRecordBytes = domain.MaxBadRecordBytes
	MaxBadReasonBytes = domain.MaxBadReasonBytes
	MaxBadRecordsKept = domain.MaxBadRecordsKept
)

// ErrTooManyBadRecords is what Reject returns, and what fails the task,
// once a stage's tasks have rejected more records than its maxBadRecords.
// It is permanent (IsPermanent): the same input gives the same records.
var ErrTooManyBadRecords = domain.ErrTooManyBadRecords

// Reject records that the task skips record, an input record it cannot
// process, for reason, and lets the task go on and commit without it. The
// record, the reason, the task and the record's offset in Input are
// stored with the attempt's outputs, and `batchwork result ID
// --bad-records` lists them once the attempt commits; a failed or fenced
// attempt's rejections are never shown or counted.
//
// The offset is where the record starts in Input, in bytes from Input's
// first byte. Reject finds it by looking for the record's bytes (less a
// trailing line end) as a whole line in the last MiB of Input the
// function has read, at or after the end of the previously found
// rejected record: exact for a record passed as read (a line of lines or
// JSON Lines input, a shuffle record's line), -1 when the record was
// changed or read long before. RejectAt takes the offset from the caller.
//
// A stage allows maxBadRecords rejections in all (0, the default: none).
// An attempt that rejects more than that fails at once, and Reject then
// returns an error wrapping ErrTooManyBadRecords; an attempt whose
// rejections would take its stage's committed total past it fails when it
// commits. Either way the task fails without retries (a permanent error),
// since its input would give the same records again. One attempt keeps at
// most MaxBadRecordsKept records (all are counted), each cut to
// MaxBadRecordBytes and its reason to MaxBadReasonBytes.
//
// Reject may be called from several goroutines at once. Under RunTask
// the records are kept in TaskResult.BadRecords, within
// TaskInput.MaxBadRecords.
func (t *Task) Reject(record []byte, reason string) error {
	return t.RejectAt(-1, record, reason)
}

// RejectAt is Reject with the record's offset in Input given by the
// caller; a negative offset has Reject find it.
func (t *Task) RejectAt(offset int64, record []byte, reason string) error {
	return t.rejectLog().Reject(offset, record, reason)
}

// rejectLog is where the task's rejections go: the runner's, or RunTask's.
func (t *Task) rejectLog() *rejects.Rejects {
	if t.rt != nil {
		return t.rt.Rejects
	}
	return t.rejects
}

// runTaskRejects is RunTask's record of rejections, and the input the
// function reads through it.
func runTaskRejects(t *Task, in TaskInput) (*rejects.Rejects, io.Reader) {
	return rejects.New(t.Stage, t.Partition, t.Attempt, in.MaxBadRecords, in.Input)
}
