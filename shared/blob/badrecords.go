package blob

import (
	"fmt"
	"strings"
)

// Bad records (records a task function rejected) sit beside the job's
// outputs, in the job area and under the same write-once rule:
//
//	jobs/<job>/badrecords/<stage>/p<partition>/a<attempt>.jsonl  one attempt's rejected records (immutable)
//
// An attempt writes its object before it commits, so an object of an
// attempt that never committed (it failed, or was fenced) may exist:
// readers show an object only when its attempt is its task's committed
// one. Deleting the job's data deletes them with the rest of JobPrefix.

// BadRecordsPrefix is where a stage's bad records are, or every stage's
// when stage is empty.
func BadRecordsPrefix(job, stage string) string {
	if stage == "" {
		return fmt.Sprintf("jobs/%s/badrecords/", job)
	}
	return fmt.Sprintf("jobs/%s/badrecords/%s/", job, stage)
}

// BadRecordsKey is the object of one attempt's rejected records, JSON
// Lines of domain.BadRecord.
func BadRecordsKey(job, stage string, partition, attempt int) string {
	return fmt.Sprintf("%sp%06d/a%d.jsonl", BadRecordsPrefix(job, stage), partition, attempt)
}

// ParseBadRecordsKey is BadRecordsKey's inverse: the stage, partition and
// attempt of a key under BadRecordsPrefix(job, ""), or false.
func ParseBadRecordsKey(job, key string) (stage string, partition, attempt int, ok bool) {
	rest, found := strings.CutPrefix(key, BadRecordsPrefix(job, ""))
	if !found {
		return "", 0, 0, false
	}
	stage, file, found := strings.Cut(rest, "/")
	if !found || stage == "" {
		return "", 0, 0, false
	}
	// Sscanf stops at the attempt's digits; the round trip rejects any
	// key that is not exactly BadRecordsKey's.
	if n, _ := fmt.Sscanf(file, "p%d/a%d", &partition, &attempt); n != 2 {
		return "", 0, 0, false
	}
	if BadRecordsKey(job, stage, partition, attempt) != key {
		return "", 0, 0, false
	}
	return stage, partition, attempt, true
}
