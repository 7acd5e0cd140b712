package domain

import "errors"

// BadRecord is one input record a task function rejected (the task API's
// Reject), as it is stored and shown: one line of its attempt's
// bad-records object (blob.BadRecordsKey).
type BadRecord struct {
	Stage     string `json:"stage"`
	Partition int    `json:"partition"`
	Attempt   int    `json:"attempt"`
	// Offset is the byte offset in the task's input (its Input stream,
	// from 0 at its first byte) where the record starts, or -1 when the
	// runner could not tell (see batchwork.Task.Reject).
	Offset int64 `json:"offset"`
	// Record is the record's bytes as the function passed them, cut to
	// MaxBadRecordBytes with a marker saying how long it was. Bytes that
	// are not UTF-8 are shown as U+FFFD.
	Record string `json:"record"`
	Reason string `json:"reason"`
	// Omitted, on an object's last line only, counts the attempt's
	// rejections past MaxBadRecordsKept, counted but not kept.
	Omitted int64 `json:"omitted,omitempty"`
}

// Bounds on what an attempt's rejections keep: one record's bytes, its
// reason, and how many records one attempt's object holds. Past the last,
// rejections are still counted (against the stage's maxBadRecords) but no
// longer kept, so one attempt's object stays under about 15 MB.
const (
	MaxBadRecordBytes = 1024
	MaxBadReasonBytes = 256
	MaxBadRecordsKept = 10_000
)

// ErrTooManyBadRecords means a stage's tasks rejected more records than
// its maxBadRecords allows. Errors that carry it also wrap ErrPermanent:
// the same input gives the same rejections, so a retry cannot help.
var ErrTooManyBadRecords = errors.New("too many bad records")
