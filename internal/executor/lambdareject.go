package executor

import (
	"fmt"
)

// LambdaReject is one record a lambda stage's function rejected, listed
// in its response's rejects (LambdaResponse.Rejects): the same as a Go
// function's Task.Reject. The rejections go with the attempt: written
// before it commits, counted in the commit against the stage's
// maxBadRecords, shown by `batchwork result ID --bad-records` only once
// the attempt committed, never when it failed or was fenced.
type LambdaReject struct {
	// Record is the record's bytes as text (cut to 1 KiB when kept).
	Record string `json:"record"`
	// Reason says what is wrong with it (cut to 256 bytes; empty is
	// shown as "(no reason given)").
	Reason string `json:"reason"`
	// Offset is where the record starts, in bytes from the first byte of
	// the task's input (for a split, the event's input.start), or -1
	// (the default when absent) when the function does not know.
	Offset *int64 `json:"offset,omitempty"`
}

// lambdaRejects takes a response's rejections into the attempt's, and
// returns the attempt's failure when they are malformed or past the
// stage's maxBadRecords (domain.ErrTooManyBadRecords, permanent). A
// malformed entry takes none of them: a response is taken whole or not
// at all.
func lambdaRejects(rj *Rejects, rejects []LambdaReject) error {
	if len(rejects) == 0 {
		return nil
	}
	for i, r := range rejects {
		if r.Offset != nil && *r.Offset < -1 {
			return fmt.Errorf("response rejects[%d]: offset %d is negative; give the record's byte offset in the task's input, or -1 (or no offset) when unknown", i, *r.Offset)
		}
	}
	if rj == nil {
		return fmt.Errorf("response rejects: this task cannot reject records")
	}
	for _, r := range rejects {
		off := int64(-1)
		if r.Offset != nil {
			off = *r.Offset
		}
		// Past maxBadRecords, Reject says so; the runner fails the
		// attempt with Rejects.Err once the function returned, as for a
		// Go function, so the remaining ones are still counted.
		_ = rj.Reject(off, []byte(r.Record), r.Reason)
	}
	return rj.Err()
}
