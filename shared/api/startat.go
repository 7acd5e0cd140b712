package api

import (
	"net/url"
	"time"

	"github.com/batchwork/batchwork/shared/spec"
)

// startAt reads POST /jobs's `at`: when the job starts (RFC 3339), or zero
// for at once. Admission checks its range.
func startAt(q url.Values) (time.Time, error) {
	v := q.Get("at")
	if v == "" {
		return time.Time{}, nil
	}
	at, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, &spec.FieldError{Field: "at", Message: "must be an RFC 3339 time such as 2026-05-01T06:00:00Z"}
	}
	return at, nil
}
