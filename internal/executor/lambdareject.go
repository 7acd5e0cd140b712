package executor

import (
	"fmt"

	"github.com/batchwork/batchwork/internal/executor/rejects"
	"github.com/batchwork/batchwork/shared/lambdatask"
)

// lambdaRejects takes a response's rejections into the attempt's, and
// returns the attempt's failure when they are malformed or past the
// stage's maxBadRecords (domain.ErrTooManyBadRecords, permanent). A
// malformed entry takes none of them: a response is taken whole or not
// at all.
func lambdaRejects(rj *rejects.Rejects, list []lambdatask.Reject) error {
	if len(list) == 0 {
		return nil
	}
	for i, r := range list {
		if r.Offset != nil && *r.Offset < -1 {
			return fmt.Errorf("response rejects[%d]: offset %d is negative; give the record's byte offset in the task's input, or -1 (or no offset) when unknown", i, *r.Offset)
		}
	}
	if rj == nil {
		return fmt.Errorf("response rejects: this task cannot reject records")
	}
	for _, r := range list {
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
